// cppext::scale(x, alpha) = alpha * x, registered with the dispatcher; _C is its module.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/mul.h>
#include <torch/library.h>

#include <string>

namespace cppext {

at::Tensor scale(const at::Tensor& x, double alpha) {
  TORCH_CHECK(x.defined(), std::string("scale: undefined tensor"));
  return at::mul(x, alpha);
}

}  // namespace cppext

TORCH_LIBRARY(cppext, m) { m.def("scale(Tensor x, float alpha) -> Tensor"); }

TORCH_LIBRARY_IMPL(cppext, CPU, m) { m.impl("scale", &cppext::scale); }

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
