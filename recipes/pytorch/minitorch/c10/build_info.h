#pragma once
namespace c10 {
// The CMake build type this library was compiled in (PyTorch's at::show_config reports it).
__attribute__((visibility("default"))) const char* build_type();
}
