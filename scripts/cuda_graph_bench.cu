// CUDA's own figures for the launches scripts/bench_graphs.py measures through runtime.hcq, with
// the same tiny kernel (4 x 256 threads, x[i] += 1): launch + synchronize, 1000 launches and one
// synchronize, a captured graph of 1000 chained launches, the same chain captured from
// programmatic-dependent launches (cudaLaunchAttributeProgrammaticStreamSerialization; the kernel
// begins with griddepcontrol.wait, and in a second graph first lets its dependents launch with
// griddepcontrol.launch_dependents; both also at 53 CTAs of 96 threads), and a graph of 1000
// independent launches (each node its own 1024-element slice, no edges). Host synchronization
// spins throughout (runtime.hcq's waits spin for their first 50 us, then sleep in the kernel;
// scripts/bench_graphs.py reports the chains of ours both ways). Prints one line: JSON{...} with
// medians in seconds.
//
//   nvcc -O2 -arch=sm_90 -o /tmp/cuda_graph_bench scripts/cuda_graph_bench.cu && /tmp/cuda_graph_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,                  \
                   cudaGetErrorString(e_));                                           \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

extern "C" __global__ void inc(unsigned *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

// The same kernel for programmatic dependent launch: it waits for its prerequisite grid (and its
// writes) before it touches x (cudaGridDependencySynchronize, as PTX).
extern "C" __global__ void inc_wait(unsigned *x, int n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

// ... and first lets its own dependent grid launch (cudaTriggerProgrammaticLaunchCompletion).
extern "C" __global__ void inc_trigger(unsigned *x, int n) {
  asm volatile("griddepcontrol.launch_dependents;");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static double replay(cudaGraphExec_t exec, cudaStream_t s, int reps) {
  CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int r = 0; r < reps; r++) {
    double t0 = now();
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    t.push_back(now() - t0);
  }
  return median(t);
}

// A graph captured from `n` launches of `kernel` with programmatic stream serialization: each
// launch may start while the one before still runs, and waits for it in griddepcontrol.wait.
static cudaGraphExec_t pdl_chain(void (*kernel)(unsigned *, int), cudaStream_t s, int n_launch,
                                 unsigned *x, int n, int grid = 4, int block = 256) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n_launch; i++) CHECK(cudaLaunchKernelEx(&cfg, kernel, x, n));
  CHECK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t exec;
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphDestroy(g));
  return exec;
}

int main() {
  const int N = 1000, ELEMS = 1024, REPS = 21;
  CHECK(cudaSetDeviceFlags(cudaDeviceScheduleSpin));
  CHECK(cudaSetDevice(0));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned *x, *slices;
  CHECK(cudaMalloc(&x, ELEMS * 4));
  CHECK(cudaMalloc(&slices, size_t(N) * ELEMS * 4));
  CHECK(cudaMemset(x, 0, ELEMS * 4));
  CHECK(cudaMemset(slices, 0, size_t(N) * ELEMS * 4));
  int n = ELEMS;
  for (int i = 0; i < 200; i++) inc<<<4, 256, 0, s>>>(x, n);
  CHECK(cudaStreamSynchronize(s));

  // 1. launch + synchronize
  std::vector<double> lat;
  for (int i = 0; i < 2000; i++) {
    double t0 = now();
    inc<<<4, 256, 0, s>>>(x, n);
    CHECK(cudaStreamSynchronize(s));
    lat.push_back(now() - t0);
  }
  double lat_min = *std::min_element(lat.begin(), lat.end());

  // 2. 1000 launches, one synchronize
  std::vector<double> b2b, b2b_cpu;
  for (int r = 0; r < 9; r++) {
    double t0 = now();
    for (int i = 0; i < N; i++) inc<<<4, 256, 0, s>>>(x, n);
    b2b_cpu.push_back(now() - t0);
    CHECK(cudaStreamSynchronize(s));
    b2b.push_back(now() - t0);
  }

  // 3. a captured graph of 1000 chained launches (each depends on the one before)
  cudaGraph_t chain;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < N; i++) inc<<<4, 256, 0, s>>>(x, n);
  CHECK(cudaStreamEndCapture(s, &chain));
  cudaGraphExec_t chain_exec;
  CHECK(cudaGraphInstantiate(&chain_exec, chain, 0));
  double chain_t = replay(chain_exec, s, REPS);
  // CPU cost of cudaGraphLaunch alone
  std::vector<double> chain_cpu;
  for (int r = 0; r < REPS; r++) {
    double t0 = now();
    CHECK(cudaGraphLaunch(chain_exec, s));
    chain_cpu.push_back(now() - t0);
    CHECK(cudaStreamSynchronize(s));
  }

  // 3b. the chain as programmatic dependent launches: kernels that wait, and kernels that
  // trigger their dependents first, then wait
  cudaGraphExec_t pdl_exec = pdl_chain(inc_wait, s, N, x, n);
  double pdl_t = replay(pdl_exec, s, REPS);
  cudaGraphExec_t trig_exec = pdl_chain(inc_trigger, s, N, x, n);
  double trig_t = replay(trig_exec, s, REPS);
  // ... and at another shape: 53 CTAs of 96 threads over 53 * 96 elements of y
  const int WIDE = 53 * 96;
  unsigned *y;
  CHECK(cudaMalloc(&y, WIDE * 4));
  CHECK(cudaMemset(y, 0, WIDE * 4));
  double pdl_wide_t = replay(pdl_chain(inc_wait, s, N, y, WIDE, 53, 96), s, REPS);
  double trig_wide_t = replay(pdl_chain(inc_trigger, s, N, y, WIDE, 53, 96), s, REPS);

  // 4. a graph of 1000 independent launches (no edges), each on its own slice
  cudaGraph_t indep;
  CHECK(cudaGraphCreate(&indep, 0));
  std::vector<unsigned *> ptrs(N);
  std::vector<void *> params(2 * N);
  for (int i = 0; i < N; i++) {
    ptrs[i] = slices + size_t(i) * ELEMS;
    void *args[2] = {&ptrs[i], &n};
    cudaKernelNodeParams p = {};
    p.func = (void *)inc;
    p.gridDim = dim3(4);
    p.blockDim = dim3(256);
    p.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, indep, nullptr, 0, &p));
  }
  cudaGraphExec_t indep_exec;
  CHECK(cudaGraphInstantiate(&indep_exec, indep, 0));
  double indep_t = replay(indep_exec, s, REPS);

  // check: x got 200 + 2000 + 9 * N + (REPS + 1 + REPS) * N increments, and (REPS + 1) * N from
  // each programmatic chain; each slice REPS + 1
  std::vector<unsigned> hx(ELEMS), hs(size_t(N) * ELEMS);
  CHECK(cudaMemcpy(hx.data(), x, ELEMS * 4, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hs.data(), slices, hs.size() * 4, cudaMemcpyDeviceToHost));
  unsigned want_x = 200 + 2000 + 9 * N + (2 * REPS + 1) * N + 2 * (REPS + 1) * N;
  std::vector<unsigned> hy(WIDE);
  CHECK(cudaMemcpy(hy.data(), y, WIDE * 4, cudaMemcpyDeviceToHost));
  bool ok = std::all_of(hx.begin(), hx.end(), [&](unsigned v) { return v == want_x; }) &&
            std::all_of(hy.begin(), hy.end(),
                        [&](unsigned v) { return v == unsigned(2 * (REPS + 1) * N); }) &&
            std::all_of(hs.begin(), hs.end(), [&](unsigned v) { return v == unsigned(REPS + 1); });
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  std::printf("JSON{\"launch_sync_median\": %.9f, \"launch_sync_min\": %.9f, \"b2b\": %.9f, "
              "\"b2b_cpu\": %.9f, \"graph_chain\": %.9f, \"graph_chain_cpu\": %.9f, "
              "\"graph_chain_pdl\": %.9f, \"graph_chain_pdl_trigger\": %.9f, "
              "\"graph_chain_pdl_wide\": %.9f, \"graph_chain_pdl_trigger_wide\": %.9f, "
              "\"graph_indep\": %.9f, \"ok\": %s, \"cuda_runtime\": %d, \"cuda_driver\": %d}\n",
              median(lat), lat_min, median(b2b), median(b2b_cpu), chain_t, median(chain_cpu),
              pdl_t, trig_t, pdl_wide_t, trig_wide_t, indep_t, ok ? "true" : "false", rt, drv);
  return ok ? 0 : 1;
}
