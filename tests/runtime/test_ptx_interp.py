"""The mock NVIDIA GPU's PTX interpreter (runtime.drivers.mock.ptx) through the runtime: SIMT
control flow, warp-level instructions, shared-memory atomics, faults like the hardware's, a
kernel that never ends, the parameter layout against NVRTC's cubins, and the audit tool."""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.drivers.mock.host_races import HostHazard
from runtime.hcq import DeviceFault, MemKind, NVDevice, SignalTimeout

DATA = Path(__file__).parent / "data"


def _nvrtc() -> None:
    from runtime.drivers.nv.compiler import find_nvrtc
    from runtime.hcq.errors import ProgramError
    try:
        find_nvrtc()
    except ProgramError as e:
        pytest.skip(f"NVRTC is not available: {str(e).splitlines()[0]}")


HAVE_NV = Path("/dev/nvidiactl").exists() and Path("/dev/nvidia-uvm").exists()


@pytest.fixture(params=[
    pytest.param("mock-nv:0", id="mock-nv"),
    pytest.param("nv:0", id="nv", marks=[
        pytest.mark.nvidia,
        pytest.mark.skipif(not HAVE_NV, reason="no NVIDIA GPU here (/dev/nvidiactl or "
                                               "/dev/nvidia-uvm is absent)")]),
])
def dev(request: pytest.FixtureRequest) -> Iterator[NVDevice]:
    """The mock, and marked `nvidia` the real GPU: the same kernels from the same CUDA source
    against the same references, so both give the same bits."""
    _nvrtc()
    d = NVDevice(request.param)
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


@pytest.fixture
def mock() -> Iterator[NVDevice]:
    _nvrtc()
    d = NVDevice("mock-nv:0")
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


def _up(d: NVDevice, a: np.ndarray) -> Any:
    b = d.alloc(max(a.nbytes, 1))
    d.copyin(b, np.ascontiguousarray(a).view(np.uint8).reshape(-1))
    return b


def _down(d: NVDevice, b: Any, dtype: Any, n: int) -> np.ndarray:
    o = np.zeros(n, dtype)
    d.copyout(o.view(np.uint8), b)
    return o


def _kernel(d: NVDevice, src: str, name: str, dyn: int = 0) -> Any:
    return d.program(d.compiler.compile(src), name, dynamic_smem_B=dyn)


# ------------------------------------------------------------------------------------ control flow
DIVERGE = r"""
extern "C" __global__ void diverge(const int* x, int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;                       // early exit of the tail
  int v = x[i], acc = 0;
  for (int k = 0; k < (v & 15); k++) {      // data-dependent trip counts
    if (k % 3 == 0) acc += k * v;
    else if (v < 0) { acc -= k; continue; }
    else acc ^= k << 2;
    if (acc > 1000) break;
  }
  switch (v & 3) { case 0: acc += 1; break; case 1: acc *= 3; break; default: acc = -acc; }
  out[i] = acc;
}
extern "C" __global__ void after_exit_barrier(const int* x, int* out) {
  __shared__ int s[128];
  int t = threadIdx.x;
  if (t >= 96) return;                      // whole warps leave; the rest meet at the barrier
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  out[blockIdx.x * 128 + t] = s[95 - t];
}
"""


def _diverge_ref(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    for i, v in enumerate(x.tolist()):
        acc = 0
        for k in range(v & 15):
            if k % 3 == 0:
                acc += k * v
            elif v < 0:
                acc -= k
                continue
            else:
                acc ^= k << 2
            if acc > 1000:
                break
        acc = {0: acc + 1, 1: acc * 3}.get(v & 3, -acc)
        out[i] = acc
    return out


def test_divergent_loops_branches_and_early_exit(dev: NVDevice) -> None:
    n = 1000
    x = np.random.default_rng(1).integers(-200, 200, n).astype(np.int32)
    X, O = _up(dev, x), dev.alloc(4 * n)
    _kernel(dev, DIVERGE, "diverge")(X, O, n, global_size=(4, 1, 1), local_size=(256, 1, 1),
                                     wait=True)
    assert np.array_equal(_down(dev, O, np.int32, n), _diverge_ref(x))


def test_barrier_after_whole_warps_exit(dev: NVDevice) -> None:
    x = np.arange(4 * 128, dtype=np.int32)
    X, O = _up(dev, x), _up(dev, np.full(4 * 128, -1, np.int32))
    _kernel(dev, DIVERGE, "after_exit_barrier")(X, O, global_size=(4, 1, 1),
                                                local_size=(128, 1, 1), wait=True)
    got = _down(dev, O, np.int32, 4 * 128).reshape(4, 128)
    want = np.full((4, 128), -1, np.int32)
    want[:, :96] = x.reshape(4, 128)[:, 95::-1]
    assert np.array_equal(got, want)


# ------------------------------------------------------------------------------------ warp level
WARP = r"""
extern "C" __global__ void warp_ops(const int* x, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  int v = x[i];
  unsigned full = 0xffffffffu;
  out[i * 8 + 0] = __shfl_up_sync(full, v, 3);
  out[i * 8 + 1] = __shfl_down_sync(full, v, 5, 16);
  out[i * 8 + 2] = __shfl_xor_sync(full, v, 6);
  out[i * 8 + 3] = __shfl_sync(full, v, 7, 8);
  out[i * 8 + 4] = __ballot_sync(full, v > 0);
  out[i * 8 + 5] = __any_sync(full, v == 42) + 2 * __all_sync(full, v > -1000);
  out[i * 8 + 6] = __reduce_add_sync(full, v) ^ __reduce_max_sync(full, (unsigned)v);
  unsigned m = 0;
  if (lane & 1) m = __activemask();
  out[i * 8 + 7] = m;
}
"""


def _warp_ref(x: np.ndarray) -> np.ndarray:
    w = x.reshape(-1, 32)
    lane = np.arange(32)
    out = np.zeros((w.shape[0], 32, 8), np.int64)
    for r, v in enumerate(w):
        up = np.where(lane >= 3, v[np.maximum(lane - 3, 0)], v)
        seg16 = lane % 16
        down = np.where(seg16 + 5 < 16, v[np.minimum(lane + 5, 31)], v)
        xor = v[lane ^ 6]
        idx8 = v[(lane // 8) * 8 + 7]
        ballot = int(sum(1 << k for k in range(32) if v[k] > 0))
        anyall = int((v == 42).any()) + 2 * int((v > -1000).all())
        red = int(v.sum()) ^ int(v.astype(np.uint32).max())
        act = np.where(lane & 1, 0xAAAAAAAA, 0)
        out[r] = np.stack([up, down, xor, idx8, np.full(32, ballot), np.full(32, anyall),
                           np.full(32, red), act], axis=1)
    return out.reshape(-1).astype(np.int64).astype(np.uint32).view(np.int32)


def test_shuffles_votes_reductions_and_activemask(dev: NVDevice) -> None:
    x = np.random.default_rng(2).integers(-50, 50, 4 * 64).astype(np.int32)
    x[17] = 42
    X, O = _up(dev, x), dev.alloc(4 * 8 * x.size)
    _kernel(dev, WARP, "warp_ops")(X, O, global_size=(4, 1, 1), local_size=(64, 1, 1),
                                   wait=True)
    got = _down(dev, O, np.int32, 8 * x.size)
    assert np.array_equal(got, _warp_ref(x))


# ------------------------------------------------------------------------------------ atomics
SHARED_ATOMICS = r"""
extern "C" __global__ void shared_hist(const unsigned* keys, unsigned* hist, int* order) {
  __shared__ unsigned h[16];
  __shared__ int ticket;
  int t = threadIdx.x;
  if (t < 16) h[t] = 0;
  if (t == 0) ticket = 0;
  __syncthreads();
  atomicAdd(&h[keys[blockIdx.x * blockDim.x + t] & 15], 1u);
  int mine = atomicAdd(&ticket, 1);          // every thread gets a distinct ticket
  atomicMax((int*)&h[0] + 0, 0);
  __syncthreads();
  if (t < 16) atomicAdd(&hist[t], h[t]);
  order[blockIdx.x * blockDim.x + t] = mine;
}
"""


def test_shared_and_global_atomics_under_contention(dev: NVDevice) -> None:
    blocks, threads = 6, 256
    keys = np.random.default_rng(3).integers(0, 1 << 16, blocks * threads).astype(np.uint32)
    K, H, O = _up(dev, keys), _up(dev, np.zeros(16, np.uint32)), dev.alloc(4 * keys.size)
    _kernel(dev, SHARED_ATOMICS, "shared_hist")(K, H, O, global_size=(blocks, 1, 1),
                                                local_size=(threads, 1, 1), wait=True)
    assert np.array_equal(_down(dev, H, np.uint32, 16), np.bincount(keys & 15, minlength=16))
    tickets = _down(dev, O, np.int32, keys.size).reshape(blocks, threads)
    for row in tickets:
        assert sorted(row.tolist()) == list(range(threads))


# ------------------------------------------------------------------------------------ faults
FAULTS = r"""
extern "C" __global__ void oob(int* p) { p[threadIdx.x + (1 << 28)] = 1; }
extern "C" __global__ void misaligned(const float* p, float* o) {
  float4 v = *(const float4*)(p + 1 + 4 * threadIdx.x);
  o[threadIdx.x] = v.x + v.y + v.z + v.w;
}
extern "C" __global__ void trapper(int* p) { if (threadIdx.x == 37) __trap(); p[threadIdx.x] = 1; }
extern "C" __global__ void bar_diverge(int* p) {
  if (threadIdx.x < 16) __syncthreads();
  p[threadIdx.x] = 1;
}
extern "C" __global__ void shared_oob(int* p, int k) {
  extern __shared__ int s[];
  s[threadIdx.x * k] = 1;
  p[threadIdx.x] = s[0];
}
"""


@pytest.mark.parametrize("name, args, dyn, pattern", [
    ("oob", lambda b: (b,), 0,
     r"line \d+ \(st\.global\.u32 .*\): page fault: write of 4 B is not mapped at address "
     r"0x[0-9a-f]+ \(CTA \(0, 0, 0\) thread \(0, 0, 0\)\)"),
    ("misaligned", lambda b: (b, b), 0,
     r"line \d+ \(ld\.global\.v4\.f32 .*\): misaligned read of 16 B at address 0x[0-9a-f]+4 "
     r"\(CTA \(0, 0, 0\) thread \(0, 0, 0\)\)"),
    ("trapper", lambda b: (b,), 0, r"trap at line \d+ \(CTA \(0, 0, 0\) thread \(37, 0, 0\)"),
    ("bar_diverge", lambda b: (b,), 0,
     r"line \d+ \(bar\.sync 0\): barrier divergence: .* \(CTA \(0, 0, 0\) thread \(16, 0, 0\)\)"),
    ("shared_oob", lambda b: (b, 1000), 256,
     r"shared write of 4 B outside the CTA's \d+ B of shared memory at address 0x[0-9a-f]+ "
     r"\(CTA \(0, 0, 0\) thread \(\d+, 0, 0\)\)"),
])
def test_faults_name_the_ptx_line_thread_and_address(name: str, args: Any, dyn: int,
                                                     pattern: str) -> None:
    _nvrtc()
    d = NVDevice("mock-nv:0")
    try:
        prg = _kernel(d, FAULTS, name, dyn)
        buf = d.alloc(4096)
        with pytest.raises(DeviceFault) as e:
            prg(*args(buf), global_size=(1, 1, 1), local_size=(64, 1, 1), wait=True,
                timeout_ms=5000)
        assert re.search(pattern, str(e.value)), str(e.value)
        with pytest.raises(DeviceFault):
            d.alloc(64)   # the device stays faulted, as after a hardware fault
    finally:
        d.close()


def test_a_kernel_that_never_ends_times_out_with_warp_positions(mock: NVDevice) -> None:
    """wait_flag spins on host memory: the wait times out naming where the warps are, and a host
    write to the flag then lets the grid finish (the channel kept running it in slices)."""
    src = (DATA / "nv_kernels.cu").read_text()
    prg = mock.program(mock.compiler.compile(src, "nv_kernels.cu"), "wait_flag")
    flag, out = mock.alloc(4, kind=MemKind.HOST), mock.alloc(4)
    fv = np.frombuffer(flag.view, np.uint32)  # type: ignore[arg-type]
    fv[0] = 0
    t0 = time.perf_counter()
    with pytest.raises(SignalTimeout) as e:
        prg(flag, out, global_size=(2, 1, 1), local_size=(64, 1, 1), wait=True, timeout_ms=300)
    assert 0.3 <= time.perf_counter() - t0 < 5.0
    assert re.search(r"kernel wait_flag running for [\d.]+ s: warps 0-3 at line \d+: "
                     r"(ld\.volatile\.global\.u32|setp\.\w+\.s32|bra)", str(e.value)), str(e.value)
    with pytest.warns(HostHazard, match="kernel wait_flag .* was running"):
        fv[0] = 7  # a deliberate write to memory a running kernel polls is reported too
        mock.synchronize(timeout_ms=5000)
    assert _down(mock, out, np.uint32, 1)[0] == 7


# ------------------------------------------------------------------------------------ layout
def test_ptx_parameter_layout_matches_nvrtc_cubins() -> None:
    """Where the PTX's `.param` declarations put each parameter is where the cubin's
    EIATTR_KPARAM_INFO does (the same ABI), for every kernel of the suite."""
    _nvrtc()
    from runtime.drivers.nv import cubin, ptx
    from runtime.drivers.nv.compiler import NVCompiler
    src = (DATA / "nv_kernels.cu").read_text() + FAULTS + WARP + DIVERGE
    cub = cubin.parse(NVCompiler("sm_90").compile(src))
    info, mod = ptx.load_info(NVCompiler("sm_90", output="ptx").compile(src), 90)
    assert set(info.kernels) == set(cub.kernels)
    for name, k in cub.kernels.items():
        p = info.kernels[name]
        assert [(q.offset, q.size) for q in p.params] == [(q.offset, q.size) for q in k.params], \
            name
        assert p.param_size == k.param_size, name


def test_committed_triton_ptx_parameters_match_their_cubins() -> None:
    from runtime.drivers.nv import cubin, ptx
    for path in sorted((DATA / "triton" / "sm90").glob("*.ptx")):
        cub = cubin.parse(path.with_suffix(".cubin").read_bytes())
        info, _ = ptx.load_info(path.read_bytes(), 90)
        for name, k in cub.kernels.items():
            assert [(q.offset, q.size) for q in info.kernels[name].params] == \
                [(q.offset, q.size) for q in k.params], path.name


# ------------------------------------------------------------------------------------ audit
def _audit(*files: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runtime.drivers.mock.ptx.audit", *files],
                          capture_output=True, text=True, timeout=120)


def test_audit_reports_unsupported_instructions_and_exit_codes(tmp_path: Path) -> None:
    ok = _audit(str(DATA / "triton" / "sm90" / "matmul.ptx"))
    assert ok.returncode == 0 and "0 unsupported" in ok.stdout, ok.stdout + ok.stderr
    bad = tmp_path / "wgmma.ptx"
    bad.write_text(""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  wgmma.fence.sync.aligned;
  setmaxnreg.inc.sync.aligned.u32 240;
  mov.u32 %r1, %tid.x;
  ret;
}
""")
    r = _audit(str(bad))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "2 unsupported" in r.stdout and "line 8: wgmma.fence.sync.aligned" in r.stdout
    assert "line 9: setmaxnreg" in r.stdout
    junk = tmp_path / "junk.ptx"
    junk.write_bytes(b"\x7fELF not ptx")
    r = _audit(str(junk), str(tmp_path / "missing.ptx"))
    assert r.returncode == 2 and "cannot audit" in r.stderr and "Traceback" not in r.stderr


def test_ptx_is_refused_by_a_gpu_that_runs_sass() -> None:
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.hcq import ProgramError
    mos = NvMockOS.with_nv_gpus(1)
    mos.nv_code_format = "cubin"  # type: ignore[attr-defined]  # as a real GPU's seam says
    d = NVDevice("nv:0", os=mos)
    try:
        with pytest.raises(ProgramError, match="this is PTX, and nv:0 runs SASS"):
            d.program(HALF, "half")
    finally:
        d.close()


def test_an_unsupported_instruction_faults_when_it_runs(tmp_path: Path) -> None:
    d = NVDevice("mock-nv:0")
    try:
        prg = d.program(b""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  setp.eq.u32 %p1, %r1, 99;
  @%p1 setmaxnreg.inc.sync.aligned.u32 240;
  ret;
}
""", "k")
        prg(0, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)  # never reached: runs
        prg(0, global_size=(1, 1, 1), local_size=(128, 1, 1), wait=False)
        with pytest.raises(DeviceFault) as e:
            d.synchronize(timeout_ms=5000)
        assert "line 10 (setmaxnreg.inc.sync.aligned.u32 240): the PTX interpreter does not " \
            "support this instruction" in str(e.value)
    finally:
        d.close()


# ------------------------------------------------------------------------------------ half types
HALF = b""".version 8.0
.target sm_90
.address_size 64
.visible .entry half(.param .u64 pa, .param .u64 pb, .param .u64 po)
{
  .reg .b16 %h<12>;
  .reg .b32 %r<8>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pa];
  ld.param.u64 %rd2, [pb];
  ld.param.u64 %rd3, [po];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 2;
  add.s64 %rd5, %rd1, %rd4;
  add.s64 %rd6, %rd2, %rd4;
  ld.global.b16 %h1, [%rd5];
  ld.global.b16 %h2, [%rd6];
  add.f16 %h3, %h1, %h2;
  mul.f16 %h4, %h1, %h2;
  fma.rn.f16 %h5, %h1, %h2, %h3;
  cvt.f32.f16 %f1, %h1;
  cvt.f32.f16 %f2, %h2;
  cvt.rn.bf16.f32 %h6, %f1;
  cvt.rn.bf16.f32 %h7, %f2;
  add.rn.bf16 %h8, %h6, %h7;
  mul.rn.bf16 %h9, %h6, %h7;
  mov.b32 %r2, {%h1, %h2};
  add.rn.f16x2 %r3, %r2, %r2;
  cvt.rn.f16x2.f32 %r4, %f1, %f2;
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd7, %rd3, %rd4;
  st.global.v4.b16 [%rd7], {%h3, %h4, %h5, %h8};
  st.global.b16 [%rd7+8], %h9;
  st.global.b16 [%rd7+10], %h9;
  st.global.b32 [%rd7+12], %r3;
  ret;
}
"""


def _bf16(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits, round to nearest even (the reference)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def test_fp16_and_bf16_arithmetic_is_correctly_rounded(mock: NVDevice) -> None:
    dev = mock
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(64) * 8).astype(np.float16)
    b = (rng.standard_normal(64) * 8).astype(np.float16)
    A, B, O = _up(dev, a), _up(dev, b), dev.alloc(64 * 16)
    dev.program(HALF, "half")(A, B, O, global_size=(1, 1, 1), local_size=(64, 1, 1), wait=True)
    got = _down(dev, O, np.uint16, 64 * 8).reshape(64, 8)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    s = (a64 + b64).astype(np.float16)
    assert np.array_equal(got[:, 0], s.view(np.uint16))
    assert np.array_equal(got[:, 1], (a64 * b64).astype(np.float16).view(np.uint16))
    assert np.array_equal(got[:, 2], (a64 * b64 + s.astype(np.float64)).astype(np.float16)
                          .view(np.uint16))
    abf, bbf = _bf16(a.astype(np.float32)), _bf16(b.astype(np.float32))
    af = (abf.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    bf = (bbf.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    # bf16 sums and products of these values are exact in float32: one rounding to bf16
    assert np.array_equal(got[:, 3], _bf16((af + bf).astype(np.float32)))
    assert np.array_equal(got[:, 4], _bf16((af * bf).astype(np.float32)))
    assert np.array_equal(got[:, 6], (2 * a64).astype(np.float16).view(np.uint16))
    assert np.array_equal(got[:, 7], (2 * b64).astype(np.float16).view(np.uint16))


# ------------------------------------------------------------------------------------ exact ops
EXACT = r"""
extern "C" __global__ void intops(const int* a, const int* b, const long long* c,
                                  const long long* d, int* o32, long long* o64, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int x = a[i], y = b[i];
  unsigned ux = x, uy = y;
  long long X = c[i], Y = d[i];
  int* r = o32 + i * 16;
  long long* R = o64 + i * 6;
  r[0] = __mulhi(x, y); r[1] = __umulhi(ux, uy);
  r[2] = y ? x / y : 7; r[3] = y ? x % y : 7;
  r[4] = uy ? ux / uy : 7; r[5] = uy ? ux % uy : 7;
  r[6] = __popc(ux); r[7] = __clz(x); r[8] = __brev(ux);
  r[9] = __byte_perm(ux, uy, 0x5140 ^ (i & 0x3333));
  r[10] = __funnelshift_l(ux, uy, i); r[11] = __funnelshift_r(ux, uy, i);
  r[12] = x >> (i & 31); r[13] = ux >> (i & 31); r[14] = __ffs(x); r[15] = min(x, y) ^ max(ux, uy);
  R[0] = __mul64hi(X, Y); R[1] = __umul64hi(X, Y);
  R[2] = Y ? X / Y : 7; R[3] = Y ? X % Y : 7;
  R[4] = (long long)x * y; R[5] = __popcll(X) + __clzll(X) * 100;
}
extern "C" __global__ void fround(const float* a, const float* b, const double* c, int* oi,
                                  float* of, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = a[i], y = b[i];
  double z = c[i];
  int* ri = oi + i * 8;
  float* rf = of + i * 10;
  float s = x * 1000.0f;
  ri[0] = __float2int_rn(s); ri[1] = __float2int_rz(s); ri[2] = __float2int_rd(s);
  ri[3] = __float2int_ru(s); ri[4] = (int)__float2uint_rn(s); ri[5] = __double2int_rn(z);
  ri[6] = (int)(z * 1e10); ri[7] = __float_as_int(__saturatef(x));
  rf[0] = __fadd_rz(x, y); rf[1] = __fadd_rd(x, y); rf[2] = __fadd_ru(x, y);
  rf[3] = __fmul_rz(x, y); rf[4] = __fmul_rd(x, y); rf[5] = __fmaf_rz(x, y, x);
  rf[6] = __double2float_rz(z); rf[7] = __double2float_rd(z);
  rf[8] = __int2float_rz(i * 12345679 + 1); rf[9] = __fdiv_rn(x, y);
}
"""


def _to_i32(v: int) -> int:
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def _to_i64(v: int) -> int:
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


def _cdiv(a: int, b: int) -> tuple[int, int]:
    q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    return q, a - q * b


def _intops_ref(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> tuple[Any, Any]:
    n = len(a)
    o32 = np.zeros((n, 16), object)
    o64 = np.zeros((n, 6), object)
    for i in range(n):
        x, y, X, Y = int(a[i]), int(b[i]), int(c[i]), int(d[i])
        ux, uy = x & 0xFFFFFFFF, y & 0xFFFFFFFF
        uX, uY = X & (2**64 - 1), Y & (2**64 - 1)
        sel = 0x5140 ^ (i & 0x3333)
        src = ux | uy << 32
        perm = sum(((src >> (8 * ((sel >> (4 * k)) & 7))) & 0xFF) << (8 * k) for k in range(4))
        sh = i & 31
        o32[i] = [(x * y) >> 32, (ux * uy) >> 32, *(_cdiv(x, y) if y else (7, 7)),
                  *((ux // uy, ux % uy) if uy else (7, 7)), bin(ux).count("1"),
                  32 - ux.bit_length(), int(f"{ux:032b}"[::-1], 2), perm,
                  ((uy << 32 | ux) << (i & 31)) >> 32,
                  ((uy << 32 | ux) >> (i & 31)), x >> sh, ux >> sh,
                  (ux & -ux).bit_length() if ux else 0, min(x, y) ^ max(ux, uy)]
        o64[i] = [(X * Y) >> 64, (uX * uY) >> 64, *(_cdiv(X, Y) if Y else (7, 7)), x * y,
                  bin(uX).count("1") + (64 - uX.bit_length()) * 100]
    return (np.array([[_to_i32(int(v)) for v in row] for row in o32], np.int32),
            np.array([[_to_i64(int(v)) for v in row] for row in o64], np.int64))


def test_integer_instructions_are_exact(dev: NVDevice) -> None:
    rng = np.random.default_rng(11)
    n = 256
    edge32 = [0, 1, -1, 2**31 - 1, -2**31 + 1, 12345, -98765, 0x55555555]
    a = np.concatenate([edge32 * 4, rng.integers(-2**31 + 1, 2**31 - 1, n - 32)]).astype(np.int32)
    b = np.concatenate([edge32[::-1] * 4, rng.integers(-2**31 + 1, 2**31 - 1, n - 32)]) \
        .astype(np.int32)
    c = rng.integers(-2**63 + 1, 2**63 - 1, n, dtype=np.int64)
    d = rng.integers(-2**40, 2**40, n, dtype=np.int64)
    c[:4], d[:4] = [0, -1, 2**63 - 1, 5], [3, 0, -1, -7]
    A, B, C, D = (_up(dev, v) for v in (a, b, c, d))
    O32, O64 = dev.alloc(n * 64), dev.alloc(n * 48)
    dev.program(dev.compiler.compile(EXACT), "intops")(
        A, B, C, D, O32, O64, n, global_size=(2, 1, 1), local_size=(128, 1, 1), wait=True)
    want32, want64 = _intops_ref(a, b, c, d)
    got32 = _down(dev, O32, np.int32, n * 16).reshape(n, 16)
    got64 = _down(dev, O64, np.int64, n * 6).reshape(n, 6)
    for col in range(16):
        assert np.array_equal(got32[:, col], want32[:, col]), col
    for col in range(6):
        assert np.array_equal(got64[:, col], want64[:, col]), col


def _round32(exact: Any, mode: str) -> np.float32:
    """A rational rounded to float32 towards zero (rz), down (rd), up (ru) or to nearest (rn)."""
    from fractions import Fraction
    r = np.float32(float(exact))          # float() rounds to nearest double, then to float32
    fr = Fraction(float(r))
    if fr == exact:
        return r
    lo = r if fr < exact else np.nextafter(r, np.float32(-np.inf))
    hi = np.nextafter(lo, np.float32(np.inf))
    if mode == "rd":
        return lo
    if mode == "ru":
        return hi
    if mode == "rz":
        return lo if exact > 0 else hi
    dl, dh = exact - Fraction(float(lo)), Fraction(float(hi)) - exact
    if dl != dh:
        return lo if dl < dh else hi
    return lo if int(lo.view(np.uint32)) % 2 == 0 else hi


def test_float_rounding_modes_are_exact(dev: NVDevice) -> None:
    from fractions import Fraction as Fr
    rng = np.random.default_rng(12)
    n = 200
    a = (rng.standard_normal(n) * 10).astype(np.float32)
    b = (rng.standard_normal(n) * 3).astype(np.float32)
    c = rng.standard_normal(n) * 1e3
    a[:6] = [0.0015, -0.0025, 2.5e6, -3e6, 0.7, -0.2]
    c[:3] = [2.5, -3.5, 1e9]
    A, B, C = _up(dev, a), _up(dev, b), _up(dev, c)
    OI, OF = dev.alloc(n * 32), dev.alloc(n * 40)
    dev.program(dev.compiler.compile(EXACT), "fround")(
        A, B, C, OI, OF, n, global_size=(1, 1, 1), local_size=(256, 1, 1), wait=True)
    gi = _down(dev, OI, np.int32, n * 8).reshape(n, 8)
    gf = _down(dev, OF, np.float32, n * 10).reshape(n, 10)
    for i in range(n):
        x, y, z = a[i], b[i], float(c[i])
        s = float(np.float32(x * np.float32(1000.0)))
        sat = lambda v: int(max(-2**31, min(2**31 - 1, v)))  # noqa: E731
        want_i = [sat(round(s)), sat(int(s)), sat(np.floor(s)), sat(np.ceil(s)),
                  _to_i32(int(max(0, min(2**32 - 1, round(s))))), sat(round(z)),
                  sat(int(z * 1e10)), int(np.clip(x, 0, 1).view(np.int32))]
        assert gi[i].tolist() == want_i, (i, gi[i].tolist(), want_i)
        X, Y = Fr(float(x)), Fr(float(y))
        want_f = [_round32(X + Y, "rz"), _round32(X + Y, "rd"), _round32(X + Y, "ru"),
                  _round32(X * Y, "rz"), _round32(X * Y, "rd"), _round32(X * Y + X, "rz"),
                  _round32(Fr(z), "rz"), _round32(Fr(z), "rd"),
                  _round32(Fr(_to_i32(i * 12345679 + 1)), "rz"), _round32(X / Y, "rn")]
        assert gf[i].view(np.uint32).tolist() == \
            np.array(want_f, np.float32).view(np.uint32).tolist(), (i, gf[i], want_f)


MIXED = r"""
extern "C" __global__ void generic_spaces(int* g, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = -1;
  __syncthreads();
  int* p = (t & 1) ? s : g + blockIdx.x * 256;   // one generic store, two state spaces
  p[t] = t * 3 + blockIdx.x;
  __syncthreads();
  out[blockIdx.x * 256 + t] = s[t];
}
extern "C" __global__ void more_atomics(unsigned* ctr, float* fsum, double* dsum,
                                        unsigned long long* mx, long long* mn, int* xch,
                                        int* olds) {
  __shared__ float sf;
  int t = threadIdx.x;
  if (t == 0) sf = 0.0f;
  __syncthreads();
  atomicInc(&ctr[0], 16u);
  atomicDec(&ctr[1], 9u);
  atomicAdd(&sf, (float)(t % 7));
  atomicAdd(fsum, 0.5f);
  atomicAdd(dsum, (double)t);
  atomicMax(mx, (unsigned long long)t * 0x100000001ull);
  atomicMin(mn, -(long long)t * 3);
  olds[t] = atomicExch(xch, t + 1);
  __syncthreads();
  if (t == 0) fsum[1] = sf;
}
"""


def test_generic_addresses_reach_shared_and_global(dev: NVDevice) -> None:
    G, O = _up(dev, np.full(512, -7, np.int32)), dev.alloc(512 * 4)
    _kernel(dev, MIXED, "generic_spaces")(G, O, global_size=(2, 1, 1), local_size=(256, 1, 1),
                                          wait=True)
    t = np.arange(256)
    g = _down(dev, G, np.int32, 512).reshape(2, 256)
    s = _down(dev, O, np.int32, 512).reshape(2, 256)
    for b in range(2):
        want = t * 3 + b
        assert np.array_equal(g[b][t % 2 == 0], want[t % 2 == 0])
        assert np.all(g[b][t % 2 == 1] == -7)
        assert np.array_equal(s[b][t % 2 == 1], want[t % 2 == 1])
        assert np.all(s[b][t % 2 == 0] == -1)


def test_more_atomics_under_contention(dev: NVDevice) -> None:
    n = 200
    C, F = _up(dev, np.array([0, 0], np.uint32)), _up(dev, np.zeros(2, np.float32))
    D, MX = _up(dev, np.zeros(1, np.float64)), _up(dev, np.zeros(1, np.uint64))
    MN, X, OL = _up(dev, np.zeros(1, np.int64)), _up(dev, np.zeros(1, np.int32)), dev.alloc(4 * n)
    _kernel(dev, MIXED, "more_atomics")(C, F, D, MX, MN, X, OL, global_size=(1, 1, 1),
                                        local_size=(n, 1, 1), wait=True)
    inc = dec = 0
    for _ in range(n):
        inc = 0 if inc >= 16 else inc + 1
        dec = 9 if dec == 0 or dec > 9 else dec - 1
    assert _down(dev, C, np.uint32, 2).tolist() == [inc, dec]
    assert _down(dev, F, np.float32, 2).tolist() == [0.5 * n, float(sum(t % 7 for t in range(n)))]
    assert _down(dev, D, np.float64, 1)[0] == sum(range(n))
    assert _down(dev, MX, np.uint64, 1)[0] == (n - 1) * 0x100000001
    assert _down(dev, MN, np.int64, 1)[0] == -(n - 1) * 3
    olds, last = _down(dev, OL, np.int32, n), _down(dev, X, np.int32, 1)[0]
    # every value was swapped out exactly once: the olds and the last value are 0..n
    assert sorted(olds.tolist() + [int(last)]) == list(range(n + 1))


def test_audit_finds_nothing_unsupported_in_the_suites_nvrtc_kernels() -> None:
    _nvrtc()
    from runtime.drivers.mock.ptx.audit import audit
    from runtime.drivers.nv.compiler import NVCompiler
    src = (DATA / "nv_kernels.cu").read_text() + FAULTS + WARP + DIVERGE + EXACT + MIXED + \
        SHARED_ATOMICS
    found, count = audit(NVCompiler("sm_90", output="ptx").compile(src).decode())
    assert count > 500 and found == [], found


TF32 = b""".version 8.0
.target sm_80
.address_size 64
.visible .entry mma_tf32(.param .u64 pfrag, .param .u64 pout, .param .u64 pround)
{
  .reg .b32 %r<20>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [pfrag];
  ld.param.u64 %rd2, [pout];
  ld.param.u64 %rd3, [pround];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd4, %r1, 48;
  add.s64 %rd5, %rd1, %rd4;
  ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd5];
  ld.global.v2.b32 {%r6, %r7}, [%rd5+16];
  ld.global.v4.b32 {%r8, %r9, %r10, %r11}, [%rd5+32];
  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%r12, %r13, %r14, %r15},
      {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%r8, %r9, %r10, %r11};
  mul.wide.u32 %rd4, %r1, 16;
  add.s64 %rd6, %rd2, %rd4;
  st.global.v4.b32 [%rd6], {%r12, %r13, %r14, %r15};
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd7, %rd3, %rd4;
  ld.global.f32 %f1, [%rd7];
  cvt.rna.tf32.f32 %r16, %f1;
  st.global.b32 [%rd7], %r16;
  ret;
}
"""


def test_tf32_mma_and_rounding_follow_the_ptx_fragment_layout(mock: NVDevice) -> None:
    """m16n8k8 tf32 fragments as the PTX ISA lays them out (lane = 4 * group + t: A rows g,
    g + 8 and columns t, t + 4; B rows t, t + 4 of column g; C/D rows g, g + 8, columns 2t,
    2t + 1), and cvt.rna.tf32.f32 rounding half away from zero to 10 mantissa bits."""
    rng = np.random.default_rng(13)
    # values exact in tf32 and small integers: the product is exact whatever the order
    A = rng.integers(-8, 8, (16, 8)).astype(np.float32)
    B = rng.integers(-8, 8, (8, 8)).astype(np.float32)
    C = rng.integers(-100, 100, (16, 8)).astype(np.float32)
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    pad = np.zeros(32, np.float32)
    frag = np.stack([A[g, t], A[g + 8, t], A[g, t + 4], A[g + 8, t + 4], B[t, g], B[t + 4, g],
                     pad, pad, C[g, 2 * t], C[g, 2 * t + 1], C[g + 8, 2 * t],
                     C[g + 8, 2 * t + 1]], axis=1)
    x = np.array([1.0 + 2.0**-11, 1.0 + 2.0**-12, -(1.0 + 3 * 2.0**-11), 3.0e38, np.inf,
                  -2.0**-130] + [0.1] * 26, np.float32)
    F, O, X = _up(mock, frag.astype(np.float32)), mock.alloc(32 * 16), _up(mock, x)
    mock.program(TF32, "mma_tf32")(F, O, X, global_size=(1, 1, 1), local_size=(32, 1, 1),
                                   wait=True)
    d = _down(mock, O, np.float32, 128).reshape(32, 4)
    D = A @ B + C
    assert np.array_equal(d, np.stack([D[g, 2 * t], D[g, 2 * t + 1], D[g + 8, 2 * t],
                                       D[g + 8, 2 * t + 1]], axis=1))
    b = x.view(np.uint32)
    want = np.where((b & 0x7F800000) == 0x7F800000, b, (b + np.uint32(0x1000)) & 0xFFFFE000)
    assert np.array_equal(_down(mock, X, np.uint32, 32), want.astype(np.uint32))
    assert _down(mock, X, np.float32, 32)[0] == np.float32(1.0 + 2.0**-10)  # half: away from 0


BARRED = r"""
extern "C" __global__ void bar_reductions(const int* x, int* out) {
  int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  int v = x[i];
  int c = __syncthreads_count(v > 0);
  int a = __syncthreads_and(v > -50);
  int o = __syncthreads_or(v == 42);
  int extra = 0;
  if (t < 64) extra = __mul24(v, 3) + __sad(v, t, 5) + __dp4a(v, 0x01020304, 1);
  int acc = 0;
  if (t % 3 == 0) for (int k = 0; k < (v & 7); k++) acc += k;   // threads arrive apart
  int c2 = __syncthreads_count(acc > 3);
  out[i * 4 + 0] = c + 1000 * c2; out[i * 4 + 1] = a; out[i * 4 + 2] = o;
  out[i * 4 + 3] = extra;
}
"""


def test_barrier_reductions_and_small_integer_ops(dev: NVDevice) -> None:
    blocks, threads = 3, 128
    x = np.random.default_rng(14).integers(-60, 60, blocks * threads).astype(np.int32)
    x[5] = 42
    X, O = _up(dev, x), dev.alloc(16 * x.size)
    _kernel(dev, BARRED, "bar_reductions")(X, O, global_size=(blocks, 1, 1),
                                           local_size=(threads, 1, 1), wait=True)
    got = _down(dev, O, np.int32, 4 * x.size).reshape(blocks, threads, 4)
    xb = x.reshape(blocks, threads)
    for b in range(blocks):
        t = np.arange(threads)
        accs = np.where(t % 3 == 0, [sum(range(int(v) & 7)) for v in xb[b]], 0)
        assert np.all(got[b, :, 0] == (xb[b] > 0).sum() + 1000 * (accs > 3).sum())
        assert np.all(got[b, :, 1] == int((xb[b] > -50).all()))
        assert np.all(got[b, :, 2] == int((xb[b] == 42).any()))
        t = np.arange(threads)
        v = xb[b].astype(np.int64)
        vb = np.stack([(v >> (8 * k)) & 0xFF for k in range(4)], axis=1)
        vb = np.where(vb >= 128, vb - 256, vb)                 # signed bytes
        dp = (vb * np.array([4, 3, 2, 1])).sum(axis=1) + 1
        want = v * 3 + np.abs(v - t) + 5 + dp
        assert np.array_equal(got[b, :64, 3], want[:64].astype(np.int32))
        assert np.all(got[b, 64:, 3] == 0)


CALLS = r"""
__device__ __noinline__ int helper(int a, int b) { return a * 3 + b; }
__device__ __noinline__ float twice(float x) { return x * 2.0f; }
struct P { int a; float b; };
__device__ __noinline__ P mk(int i) { P p; p.a = i; p.b = i * 0.5f; return p; }
__device__ __noinline__ int collatz(int v) {   // loops and early returns inside a callee
  int n = 0;
  while (v != 1) { if (n > 200) return -1; v = (v & 1) ? 3 * v + 1 : v / 2; n++; }
  return n;
}
extern "C" __global__ void calls(int* out, float* f) {
  int t = threadIdx.x;
  int r = 0;
  if (t & 1) r = helper(t, 7);                 // a call in divergent code
  P p = mk(t);
  out[t * 2] = r + p.a;
  out[t * 2 + 1] = collatz(t + 1) + helper(collatz(t + 2), 1);
  f[t] = twice(p.b);
}
"""
RECURSIVE = """.version 8.0
.target sm_90
.address_size 64
.func (.param .b32 f_ret) f(.param .b32 f_a)
{
  .reg .b32 %r<4>;
  ld.param.b32 %r1, [f_a];
  {
  .param .b32 a;
  .param .b32 r;
  st.param.b32 [a], %r1;
  call.uni (r), f, (a);
  ld.param.b32 %r2, [r];
  }
  st.param.b32 [f_ret], %r2;
  ret;
}
.visible .entry recursive(.param .u64 p)
{
  .reg .b32 %r<4>;
  {
  .param .b32 a;
  .param .b32 r;
  st.param.b32 [a], %r1;
  call.uni (r), f, (a);
  ld.param.b32 %r2, [r];
  }
  ret;
}
"""


def _collatz(v: int) -> int:
    n = 0
    while v != 1:
        if n > 200:
            return -1
        v = 3 * v + 1 if v & 1 else v // 2
        n += 1
    return n


def test_device_function_calls(dev: NVDevice) -> None:
    O, F = dev.alloc(4 * 2 * 64), dev.alloc(4 * 64)
    _kernel(dev, CALLS, "calls")(O, F, global_size=(1, 1, 1), local_size=(64, 1, 1), wait=True)
    t = np.arange(64)
    got = _down(dev, O, np.int32, 128).reshape(64, 2)
    assert np.array_equal(got[:, 0], np.where(t & 1, t * 3 + 7, 0) + t)
    assert got[:, 1].tolist() == [_collatz(i + 1) + _collatz(i + 2) * 3 + 1 for i in range(64)]
    assert np.array_equal(_down(dev, F, np.float32, 64), (t * 0.5 * 2).astype(np.float32))


def test_recursion_is_reported_unsupported() -> None:
    _nvrtc()
    from runtime.drivers.mock.ptx.audit import audit
    from runtime.drivers.nv.compiler import NVCompiler
    found, _ = audit(NVCompiler("sm_90", output="ptx").compile(CALLS).decode())
    assert found == []
    found, _ = audit(RECURSIVE)
    assert len(found) == 1 and found[0].kernel == "recursive" and "recursion" in found[0].reason \
        and found[0].line == 12, found
