#pragma once
#define MINITORCH_STR2(x) #x
#define MINITORCH_STR(x) MINITORCH_STR2(x)
namespace c10 {
// The CMake build type this library was compiled in, and the C++ standard's __cplusplus
// (PyTorch's at::show_config reports the build type).
__attribute__((visibility("default"))) const char* build_type();
}
