// The device code of kiln's fatbin fixtures (see regenerate.sh).
__global__ void add(float* x, float a) { x[threadIdx.x] += a; }
