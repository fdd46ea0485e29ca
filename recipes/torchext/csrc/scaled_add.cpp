// torchext::scaled_add(a, b, alpha) = a + alpha * b, registered with the dispatcher.
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <torch/library.h>

#include <string>

namespace torchext {

at::Tensor scaled_add(const at::Tensor& a, const at::Tensor& b, double alpha) {
  TORCH_CHECK(a.sizes() == b.sizes(), std::string("scaled_add: shapes differ: ") +
              c10::str(a.sizes()) + " vs " + c10::str(b.sizes()));
  return at::add(a, b, alpha);
}

}  // namespace torchext

TORCH_LIBRARY(torchext, m) {
  m.def("scaled_add(Tensor a, Tensor b, float alpha) -> Tensor");
}

TORCH_LIBRARY_IMPL(torchext, CPU, m) {
  m.impl("scaled_add", &torchext::scaled_add);
}
