#include "build_info.h"
#include "config.h"  // configure's, in the source tree
namespace c10 {
const char* build_type() { return MINITORCH_BUILD_TYPE; }
const char* configured_type() { return MINITORCH_CONFIGURED_TYPE; }
}
