// The kernel: y_out[i] = a * x[i] + y[i]. Plain CUDA (no torch headers), so nvcc is quick.
#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void axpy_kernel(float a, const float* x, const float* y, float* out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

}  // namespace

namespace cudatorchext {

cudaError_t launch_axpy(float a, const float* x, const float* y, float* out, int64_t n,
                        cudaStream_t stream) {
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((n + threads - 1) / threads);
  if (n > 0) axpy_kernel<<<blocks, threads, 0, stream>>>(a, x, y, out, n);
  return cudaGetLastError();
}

}  // namespace cudatorchext
