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

// The smoke test's device round trip: copy in, run the kernel, copy back, check every
// element. Returns 0 when all match, a cudaError_t (> 0) on a CUDA failure, -1 on a wrong
// result; *bad gets the first wrong index (or -1).
extern "C" int cudademo_selftest(int n, int* bad) {
  *bad = -1;
  float *hx = new float[n], *hy = new float[n];
  for (int i = 0; i < n; ++i) { hx[i] = static_cast<float>(i); hy[i] = 1.0f; }
  float *dx = nullptr, *dy = nullptr;
  cudaError_t err = cudaMalloc(&dx, n * sizeof(float));
  if (err == cudaSuccess) err = cudaMalloc(&dy, n * sizeof(float));
  if (err == cudaSuccess) err = cudaMemcpy(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = static_cast<cudaError_t>(cudademo_launch_axpy(2.0f, dx, dy, n));
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err == cudaSuccess) err = cudaMemcpy(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost);
  int rc = static_cast<int>(err);
  if (err == cudaSuccess) {
    for (int i = 0; i < n; ++i) {
      if (hy[i] != 2.0f * static_cast<float>(i) + 1.0f) { *bad = i; rc = -1; break; }
    }
  }
  cudaFree(dx);
  cudaFree(dy);
  delete[] hx;
  delete[] hy;
  return rc;
}

extern "C" const char* cudademo_error_string(int code) {
  return code > 0 ? cudaGetErrorString(static_cast<cudaError_t>(code)) : "wrong result";
}
