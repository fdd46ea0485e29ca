// torch.ops.cudatorchext.axpy(a, x, y) = a * x + y on CUDA float tensors, by the kernel of
// axpy_kernel.cu on the current stream. Registering the CUDA implementation needs no GPU:
// importing works on a machine without one.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cuda_runtime.h>

namespace cudatorchext {

cudaError_t launch_axpy(float a, const float* x, const float* y, float* out, int64_t n,
                        cudaStream_t stream);

at::Tensor axpy(double a, const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda(), "axpy: x and y must be CUDA tensors");
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat, "axpy: float32 only");
  TORCH_CHECK(x.sizes() == y.sizes(), "axpy: x and y differ in shape");
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  cudaError_t err = launch_axpy(static_cast<float>(a), xc.data_ptr<float>(), yc.data_ptr<float>(),
                                out.data_ptr<float>(), xc.numel(), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "axpy: kernel launch failed: ", cudaGetErrorString(err));
  return out;
}

}  // namespace cudatorchext

TORCH_LIBRARY(cudatorchext, m) { m.def("axpy(float a, Tensor x, Tensor y) -> Tensor"); }

TORCH_LIBRARY_IMPL(cudatorchext, CUDA, m) { m.impl("axpy", &cudatorchext::axpy); }

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};

PyMODINIT_FUNC PyInit__C(void) { return PyModule_Create(&module); }
