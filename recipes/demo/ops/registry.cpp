#include "ops.h"

namespace demo {

Tensor call_op(const std::string& name, const Tensor& a, const Tensor& b, double alpha) {
  if (name == "add") return native::add_kernel(a, b, alpha);
  check(false, "unknown op: " + name);
  return a;
}

}  // namespace demo
