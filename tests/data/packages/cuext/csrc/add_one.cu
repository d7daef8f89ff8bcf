// Kept free of torch headers so the fixture compiles in seconds: a kernel and a launcher.
#include <cuda_runtime.h>

__global__ void add_one_kernel(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] += 1.0f;
}

int launch_add_one(float* data, int n) {
  add_one_kernel<<<(n + 255) / 256, 256>>>(data, n);
  return static_cast<int>(cudaGetLastError());
}
