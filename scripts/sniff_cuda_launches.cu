// The CUDA side of scripts/sniff_cuda_launches.py: launches of kernels with a distinctive shape
// through CUDA's own paths (a captured graph of chained launches, back-to-back stream launches,
// programmatic dependent launches, and a graph captured from those), so that the script can find
// the launch descriptors and pushbuffers CUDA writes in this process's memory. A shared library
// the script loads with ctypes, so the scan runs in the process that owns CUDA's mappings.
//
//   nvcc -O2 -arch=sm_90 -shared -Xcompiler -fPIC -o libsniff.so scripts/sniff_cuda_launches.cu
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

// x[i] += magic over the grid; `idx` tells the launches of a chain apart in their constant banks.
extern "C" __global__ void sniff_plain(unsigned *x, unsigned magic, int idx) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i & 0xFFFF] += magic + (unsigned)idx;
}

// A programmatic-dependent-launch consumer: waits for its prerequisite grid first.
extern "C" __global__ void sniff_wait(unsigned *x, unsigned magic, int idx) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i & 0xFFFF] += magic + (unsigned)idx;
}

// A consumer that also lets its own dependents launch early (before its stores).
extern "C" __global__ void sniff_trigger(unsigned *x, unsigned magic, int idx) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i & 0xFFFF] += magic + (unsigned)idx;
}

// Copies `words` dwords from any GPU address of this context into dst (reads only).
extern "C" __global__ void sniff_peek(const unsigned long long src, unsigned *dst, int words) {
  const volatile unsigned *s = (const volatile unsigned *)src;
  for (int i = threadIdx.x; i < words; i += blockDim.x) dst[i] = s[i];
}

static unsigned *g_x = nullptr;
static unsigned *g_peek = nullptr;
static cudaStream_t g_stream = nullptr;
static std::vector<cudaGraphExec_t> g_keep;  // graphs stay instantiated until sn_release

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

static void *kernel_of(int kind) {
  return kind == 0 ? (void *)sniff_plain : kind == 1 ? (void *)sniff_wait : (void *)sniff_trigger;
}

extern "C" int sn_init() {
  cudaError_t e = cudaSetDevice(0);
  if (!e) e = cudaFree(0);
  if (!e) e = cudaMalloc(&g_x, 0x10000 * 4);
  if (!e) e = cudaMemset(g_x, 0, 0x10000 * 4);
  if (!e) e = cudaMalloc(&g_peek, 1 << 20);
  if (!e) e = cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking);
  if (!e) e = cudaDeviceSynchronize();
  return (int)e;
}

// One launch on the stream: kernel `kind` (0 plain, 1 wait, 2 trigger), programmatic stream
// serialization when `pdl`.
static cudaError_t launch(int kind, int pdl, int grid, int block, unsigned magic, int idx) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  cfg.gridDim = dim3(grid, 1, 1);
  cfg.blockDim = dim3(block, 1, 1);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = g_stream;
  if (pdl) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  void *args[] = {&g_x, &magic, &idx};
  return cudaLaunchKernelExC(&cfg, kernel_of(kind), args);
}

// `n` launches on the stream (no graph), then a synchronize; `reps` rounds, median wall in ms.
extern "C" int sn_stream(int kind, int pdl, int n, int grid, int block, unsigned magic, int reps,
                         double *ms) {
  std::vector<double> walls;
  for (int r = 0; r < reps; r++) {
    double t = now();
    for (int i = 0; i < n; i++) {
      cudaError_t e = launch(kind, pdl, grid, block, magic, i);
      if (e) return (int)e;
    }
    cudaError_t e = cudaStreamSynchronize(g_stream);
    if (e) return (int)e;
    walls.push_back(now() - t);
  }
  *ms = median(walls) * 1e3;
  return 0;
}

// `n` launches captured into a graph (chained by stream order; with `pdl` the capture records
// programmatic edges), instantiated, replayed `reps` times (median wall in ms, launch to
// synchronize). The instantiated graph is kept, so its descriptors stay in memory for the scan.
extern "C" int sn_graph(int kind, int pdl, int n, int grid, int block, unsigned magic, int reps,
                        double *ms) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  cudaError_t e = cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeThreadLocal);
  if (e) return (int)e;
  for (int i = 0; i < n; i++) {
    e = launch(kind, pdl, grid, block, magic, i);
    if (e) break;
  }
  cudaError_t e2 = cudaStreamEndCapture(g_stream, &g);
  if (e) return (int)e;
  if (e2) return (int)e2;
  e = cudaGraphInstantiate(&ge, g, 0);
  if (e) return (int)e;
  cudaGraphDestroy(g);
  e = cudaGraphUpload(ge, g_stream);
  if (!e) e = cudaStreamSynchronize(g_stream);
  if (e) return (int)e;
  std::vector<double> walls;
  for (int r = 0; r < reps; r++) {
    double t = now();
    e = cudaGraphLaunch(ge, g_stream);
    if (!e) e = cudaStreamSynchronize(g_stream);
    if (e) return (int)e;
    walls.push_back(now() - t);
  }
  *ms = median(walls) * 1e3;
  g_keep.push_back(ge);
  return 0;
}

// Reads `bytes` (a multiple of 4, at most 1 MiB) at GPU address `va` through a kernel.
extern "C" int sn_peek(unsigned long long va, void *host, int bytes) {
  sniff_peek<<<1, 256, 0, g_stream>>>(va, g_peek, bytes / 4);
  cudaError_t e = cudaGetLastError();
  if (!e) e = cudaMemcpyAsync(host, g_peek, bytes, cudaMemcpyDeviceToHost, g_stream);
  if (!e) e = cudaStreamSynchronize(g_stream);
  return (int)e;
}

// The GPU address of the work buffer (to tell CUDA's user allocations from its own).
extern "C" unsigned long long sn_buffer() { return (unsigned long long)g_x; }

extern "C" int sn_readback(unsigned *host, int words) {
  return (int)cudaMemcpy(host, g_x, words * 4, cudaMemcpyDeviceToHost);
}

extern "C" const char *sn_error(int e) { return cudaGetErrorString((cudaError_t)e); }

extern "C" void sn_release() {
  for (auto ge : g_keep) cudaGraphExecDestroy(ge);
  g_keep.clear();
}
