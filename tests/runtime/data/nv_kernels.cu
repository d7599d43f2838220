// Kernels for the NVIDIA runtime tests: compiled with NVRTC for sm_90 on the H200 (test_nv_hw.py),
// and committed as cubins from NVRTC 12.9 (old ELF ABI) and 13.0 (new ABI) for the loader and mock
// tests (test_nv_mock.py). Every kernel is extern "C" so its ELF name is its C name.

extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void inc(unsigned int* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

// 2D grid, not a multiple of the block: out[y][x] = in[x][y] * s
extern "C" __global__ void transpose_scale(const float* in, float* out, int w, int h, float s) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[x * h + y] = in[y * w + x] * s;
}

// 3D grid: every thread writes its global linear id and a checksum of its coordinates.
extern "C" __global__ void grid3d(unsigned int* out, int nx, int ny, int nz) {
  unsigned x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  unsigned z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x < nx && y < ny && z < nz) out[(z * ny + y) * nx + x] = x + 1000u * y + 1000000u * z;
}

// Static shared memory with barriers: reverse each block of 256 elements.
extern "C" __global__ void block_reverse(const int* in, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x, base = blockIdx.x * 256;
  s[t] = in[base + t];
  __syncthreads();
  out[base + t] = s[255 - t];
}

// Dynamic shared memory: per-block tree sum.
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
  extern __shared__ float sh[];
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  sh[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) sh[t] += sh[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = sh[0];
}

// Many parameters of mixed sizes (alignment inside the parameter block).
extern "C" __global__ void many_params(double* out, char c0, short s1, int i2, long long l3,
                                       float f4, double d5, char c6, int i7, double d8, float f9,
                                       unsigned char u10, long long l11, int i12, short s13,
                                       float f14, double d15) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    double v[16] = {(double)c0, (double)s1, (double)i2, (double)l3, f4, d5, (double)c6,
                    (double)i7, d8, f9, (double)u10, (double)l11, (double)i12, (double)s13, f14,
                    d15};
    for (int k = 0; k < 16; k++) out[k] = v[k];
  }
}

// Atomics: histogram, max and a CAS-built float add.
extern "C" __global__ void atomics(const unsigned int* keys, int n, unsigned int* hist,
                                   int* maxv, float* fsum) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned k = keys[i];
  atomicAdd(&hist[k % 64], 1u);
  atomicMax(maxv, (int)k);
  float add = 1.0f;
  int* p = (int*)fsum;
  int old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __float_as_int(__int_as_float(assumed) + add));
  } while (assumed != old);
}

// Double precision with fma.
extern "C" __global__ void daxpy(double a, const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fma(a, x[i], y[i]);
}

// A __device__ global (its address reaches the code through a relocated constant bank).
__device__ int table[8] = {3, 1, 4, 1, 5, 9, 2, 6};
extern "C" __global__ void lookup(const int* idx, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = table[idx[i] & 7] * 10 + i;
}

// __constant__ data (constant bank 3).
__constant__ float coeffs[4] = {0.5f, -1.0f, 2.0f, 0.25f};
extern "C" __global__ void poly(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = ((coeffs[3] * v + coeffs[2]) * v + coeffs[1]) * v + coeffs[0];
  }
}

// Local memory: a per-thread array indexed at run time lives in the stack frame.
extern "C" __global__ void local_array(const int* in, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int buf[96];
  for (int k = 0; k < 96; k++) buf[k] = k * (i + 1);
  if (i < n) out[i] = buf[in[i] % 96] + buf[(in[i] * 7) % 96];
}

// Warp shuffle reduction, one result per warp.
extern "C" __global__ void warp_sum(const int* in, int* out) {
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v;
}

// Grid-stride loop over more elements than threads.
extern "C" __global__ void scale_stride(float* x, long long n, float s) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    x[i] *= s;
}

// A struct passed by value.
struct Params { int n; double scale; float bias; };
extern "C" __global__ void affine(const float* x, float* y, Params p) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < p.n) y[i] = (float)(x[i] * p.scale) + p.bias;
}

// Spins until a flag in host memory becomes non-zero (the timeout test releases it).
extern "C" __global__ void wait_flag(volatile unsigned int* flag, unsigned int* out) {
  while (*flag == 0) { }
  out[0] = *flag;
}

// Writes through a null pointer (the fault test).
extern "C" __global__ void write_null(int* p) { p[threadIdx.x + (1 << 20)] = 1; }
