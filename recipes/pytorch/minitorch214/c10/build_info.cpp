#include "build_info.h"
namespace c10 {
const char* build_type() { return MINITORCH_BUILD_TYPE " CXX=" MINITORCH_STR(__cplusplus); }
}
