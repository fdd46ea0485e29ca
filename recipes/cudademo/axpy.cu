// y = a * x + y on the device; the launcher is plain C so any host can call it.
#include <cuda_runtime.h>

__global__ void axpy_kernel(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" int cudademo_launch_axpy(float a, const float* x, float* y, int n) {
  axpy_kernel<<<(n + 255) / 256, 256>>>(a, x, y, n);
  return static_cast<int>(cudaGetLastError());
}
