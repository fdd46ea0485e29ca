// The ops library: like libtorch_cpu's at::native kernels.
#pragma once
#include "core.h"

#if defined(DEMO_OPS_BUILDING)
#define DEMO_OPS_API __attribute__((visibility("default")))
#else
#define DEMO_OPS_API
#endif

namespace demo {
namespace native {

// out = self + alpha * other, elementwise. The function worth breaking in.
DEMO_OPS_API Tensor add_kernel(const Tensor& self, const Tensor& other, double alpha);

}  // namespace native

// Dispatch by op name, like the dispatcher: "add" -> native::add_kernel.
DEMO_OPS_API Tensor call_op(const std::string& name, const Tensor& a, const Tensor& b, double alpha);

}  // namespace demo
