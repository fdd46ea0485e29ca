#include "ops.h"

namespace demo {
namespace native {

Tensor add_kernel(const Tensor& self, const Tensor& other, double alpha) {
  check(self.numel() == other.numel(), "add_kernel: size mismatch");
  const int64_t n = self.numel();
  std::vector<double> result(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    result[i] = self.data()[i] + alpha * other.data()[i];
  }
  return Tensor(std::move(result));
}

}  // namespace native
}  // namespace demo
