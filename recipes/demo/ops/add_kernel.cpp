#include "ops.h"

namespace demo {
namespace native {

Tensor add_kernel(const Tensor& self, const Tensor& other, double alpha) {
  const int64_t n = self.numel();
  // The message is only built on failure, so a breakpoint here stops in this file.
  if (n != other.numel()) check(false, "add_kernel: size mismatch");
  std::vector<double> result(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    result[i] = self.data()[i] + alpha * other.data()[i];
  }
  return Tensor(std::move(result));
}

}  // namespace native
}  // namespace demo
