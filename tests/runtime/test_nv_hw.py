"""The NVIDIA driver on a real GPU (the H200), what is NVIDIA-specific: kernels from NVRTC and Triton
checked against numpy and PyTorch, copies of 1 B to 1 GiB byte for byte, signals and cross-channel
waits, 10,000 launches without a leak, the timeout path, and (run last, on its own device) a kernel
that faults. What every device promises (graphs among it) is tests/runtime/test_device_contract.py,
which runs here too.

Every test is marked `nvidia` and skips with a reason where no NVIDIA GPU is present. Hangs cannot
eat a machine's lease: the device's waits time out (20 s), pytest-timeout (when installed) bounds
each test, and a faulthandler watchdog kills the process with a traceback if a test overruns.
PyTorch and Triton run in a subprocess (compiling the Triton kernels and computing the references on
the same GPU) so that libcuda and this runtime never share a process.
"""
from __future__ import annotations

import faulthandler
import json
import os
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import DeviceFault, MemKind, SignalTimeout

HAVE_GPU = os.path.exists("/dev/nvidiactl") and os.path.exists("/dev/nvidia-uvm")
pytestmark = [pytest.mark.nvidia,
              pytest.mark.skipif(not HAVE_GPU, reason="no NVIDIA GPU here (/dev/nvidiactl or "
                                                      "/dev/nvidia-uvm is absent)")]
SRC = (Path(__file__).parent / "data" / "nv_kernels.cu").read_text()
WATCHDOG_S = float(os.environ.get("NV_TEST_WATCHDOG_S", "240"))


def _device_kwargs() -> dict[str, Any]:
    # The PCAS action is a constructor argument; device_check.sh may retry with tinygrad's
    # PREFETCH_SCHEDULE (9) if the default ever fails on a driver.
    act = os.environ.get("NV_PCAS_ACTION")
    return {"pcas_action": int(act, 0)} if act else {}


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    """Kills the process (with every thread's traceback) if a test runs away."""
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def dev():  # type: ignore[no-untyped-def]
    from runtime.drivers.nv.device import NVDevice
    d = NVDevice("nv:0", **_device_kwargs())
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


@pytest.fixture(scope="module")
def lib(dev) -> bytes:  # type: ignore[no-untyped-def]
    return dev.compiler.compile(SRC, "nv_kernels.cu")


def _up(dev, arr: np.ndarray):  # type: ignore[no-untyped-def]
    buf = dev.alloc(max(arr.nbytes, 1))
    dev.copyin(buf, np.ascontiguousarray(arr).view(np.uint8).reshape(-1))
    return buf


def _down(dev, buf, dtype: Any, count: int) -> np.ndarray:  # type: ignore[no-untyped-def]
    out = np.zeros(count, dtype)
    dev.copyout(out.view(np.uint8), buf)
    return out


# ------------------------------------------------------------------------------------ bring-up
def test_bring_up_is_hopper_with_v04_qmds(dev) -> None:  # type: ignore[no-untyped-def]
    from hcq_bindings.nv import rm_580 as rm
    print(f"\n{dev!r}: compute {dev.compute_class:#x} gpfifo {dev.gpfifo_class:#x} copy "
          f"{dev.dma_class:#x} usermode {dev.usermode_class:#x}; GR {dev.gpu}")
    assert dev.arch == "sm_90" and dev.sass_version == 0x90
    assert dev.compute_class == rm.HOPPER_COMPUTE_A and dev.qmd_class.major == 4
    assert dev.gen.name == "hopper" and dev.gen.classes == (
        rm.HOPPER_USERMODE_A, rm.HOPPER_CHANNEL_GPFIFO_A, rm.HOPPER_COMPUTE_A, rm.HOPPER_DMA_COPY_A)
    assert dev.driver_version.startswith("580.")


def test_vector_add(dev, lib) -> None:  # type: ignore[no-untyped-def]
    n = 1_000_003
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    A, B = _up(dev, a), _up(dev, b)
    C = dev.alloc(n * 4)
    prg = dev.program(lib, "vadd")
    t = prg(A, B, C, n, global_size=((n + 255) // 256, 1, 1), local_size=(256, 1, 1), wait=True)
    assert np.array_equal(_down(dev, C, np.float32, n), a + b)
    print(f"\nvadd of {n} floats: {t * 1e6:.1f} us on the GPU clock")


_SPIN = r"""
extern "C" __global__ void spin_ns(unsigned long long ns, unsigned long long *out) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
  if (threadIdx.x == 0) out[0] = t - t0;
}
"""


def test_wait_returns_the_grid_time_from_the_slot_timestamps(dev) -> None:  # type: ignore[no-untyped-def]
    """wait=True goes through the launch slots; the GPU time it returns (QMD release timer minus
    the SEND_PCAS-time progress timer) covers a kernel that spins a known time on the GPU timer
    and is small for an empty one."""
    prg = dev.program(dev.compiler.compile(_SPIN, "spin.cu"), "spin_ns")
    out = dev.alloc(8)
    shape = ((1, 1, 1), (32, 1, 1))
    prg(0, out, global_size=shape[0], local_size=shape[1], wait=True)  # warm the slot ring
    short = [prg(0, out, global_size=shape[0], local_size=shape[1], wait=True) for _ in range(20)]
    long = [prg(200_000, out, global_size=shape[0], local_size=shape[1], wait=True)
            for _ in range(5)]
    spun = int(_down(dev, out, np.uint64, 1)[0])
    assert prg._timed_commands is None and prg._hot[shape] is not None
    assert all(0 < t < 50e-6 for t in short), short
    assert spun >= 200_000 and all(200e-6 <= t < 2e-3 for t in long), (spun, long)
    print(f"\nwait=True GPU time: empty {sorted(short)[10] * 1e6:.2f} us, "
          f"200 us spin {sorted(long)[2] * 1e6:.1f} us")


# ------------------------------------------------------------------------------------ copies
@pytest.mark.parametrize("size", [1, 5, 4095, 4097, (1 << 20) + 7, 64 << 20, 1 << 30])
def test_copies_byte_for_byte(dev, size: int) -> None:  # type: ignore[no-untyped-def]
    x = np.frombuffer(np.random.default_rng(size).bytes(size), np.uint8)
    a, b = dev.alloc(size), dev.alloc(size)
    dev.copyin(a, x)
    dev.transfer(b, a, size)
    out = np.empty(size, np.uint8)
    dev.copyout(out, b)
    assert np.array_equal(out, x)
    dev.free(a)
    dev.free(b)


def test_pinned_host_copies(dev) -> None:  # type: ignore[no-untyped-def]
    size = 256 << 20
    src = dev.alloc(size, kind=MemKind.HOST, cpu_access=True)
    dst = dev.alloc(size, kind=MemKind.HOST, cpu_access=True)
    vram = dev.alloc(size)
    x = np.frombuffer(np.random.default_rng(12).bytes(size), np.uint8)
    np.frombuffer(src.cpu_view(), np.uint8)[:] = x
    v = dev.next_timeline()
    dev.copy_queue().wait(dev.timeline_signal, v - 1).copy(vram.va, src.va, size) \
        .copy(dst.va, vram.va, size).signal(dev.timeline_signal, v).submit()
    dev.synchronize()
    assert np.array_equal(np.frombuffer(dst.cpu_view(), np.uint8), x)
    for b in (src, dst, vram):
        dev.free(b)


# ------------------------------------------------------------------------------------ signals
def test_compute_waits_on_copy(dev, lib) -> None:  # type: ignore[no-untyped-def]
    n = 1 << 20
    prg = dev.program(lib, "vadd")
    src = _up(dev, np.arange(n, dtype=np.float32))
    ones = _up(dev, np.ones(n, np.float32))
    b, c = dev.alloc(n * 4), dev.alloc(n * 4)
    dev.synchronize()
    gate, done = dev.new_signal(0), dev.new_signal(0)
    ka = prg.fill_kernargs((ones, b, c, n), (n // 256, 1, 1), (256, 1, 1))
    dev.compute_queue().wait(gate, 7).memory_barrier().exec(prg, ka, (n // 256, 1, 1),
                                                            (256, 1, 1)).signal(done, 1).submit()
    time.sleep(0.05)
    assert done.value == 0  # the compute channel is held by the copy channel's signal
    dev.copy_queue().copy(b.va, src.va, n * 4).signal(gate, 7).submit()
    done.wait(1, 10_000)
    assert np.array_equal(_down(dev, c, np.float32, n), np.arange(n, dtype=np.float32) + 1)
    assert done.timestamp >= gate.timestamp > 0


def test_ten_thousand_launches_without_a_leak(dev, lib) -> None:  # type: ignore[no-untyped-def]
    prg = dev.program(lib, "inc")
    x = _up(dev, np.zeros(1024, np.uint32))
    prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
    dev.synchronize()
    live = (dev.allocator.live_count, len(dev.rm.live()), len(os.listdir("/proc/self/fd")))
    t = time.perf_counter()
    for _ in range(10_000):
        prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
    dev.synchronize()
    dt = time.perf_counter() - t
    assert np.all(_down(dev, x, np.uint32, 1024) == 10_001)
    assert (dev.allocator.live_count, len(dev.rm.live()), len(os.listdir("/proc/self/fd"))) == live
    print(f"\n10,000 launches in {dt * 1e3:.0f} ms ({dt * 1e2:.1f} us each)")


@pytest.mark.parametrize("native_launch", [True, False])
def test_dependent_launches_through_the_slot_rings(  # type: ignore[no-untyped-def]
        dev, lib, native_launch: bool) -> None:
    """300 launches without wait, each a read-modify-write of what the one before wrote (a launch
    that overlapped or read stale data would lose increments), through the native and the Python
    launch paths; every 37th is followed by a copy-engine snapshot, so the next launch orders
    itself by the timeline acquire instead of WAIT_FOR_IDLE. Slots are reused many times over."""
    from runtime.drivers.nv.launcher import native_helper
    from runtime.hcq import native
    dev.launch_native = native_launch
    try:
        prg = dev.program(lib, "inc")
        x = _up(dev, np.zeros(1024, np.uint32))
        y = dev.alloc(4096)
        for k in range(1, 301):
            prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
            if k % 37 == 0:
                dev.transfer(y, x, 4096)
        dev.synchronize()
        assert np.all(_down(dev, x, np.uint32, 1024) == 300)
        assert np.all(_down(dev, y, np.uint32, 1024) == 296)  # the last snapshot, after 8 * 37
        hot = prg._hot[(4, 1, 1), (256, 1, 1)]
        assert hot is not None and hot.n < 300
        is_native = type(hot.fn).__name__ == "builtin_function_or_method"
        assert is_native == (native_launch and native_helper() is not None)
        prg.free()
    finally:
        dev.launch_native = native.enabled()


def test_timeout_reports_state_and_recovers(dev, lib) -> None:  # type: ignore[no-untyped-def]
    # 1. A GPU wait that nothing releases.
    never = dev.new_signal(0)
    v = dev.next_timeline()
    dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, v).submit()
    with pytest.raises(SignalTimeout) as e:
        dev.synchronize(timeout_ms=300)
    msg = str(e.value)
    print("\n" + msg)
    assert "compute channel" in msg and "ACQ_CIRC_GEQ" in msg
    never.value = 1
    dev.synchronize(timeout_ms=10_000)
    # 2. A kernel that spins on host memory until the CPU releases it.
    flag = dev.alloc(4096, kind=MemKind.GTT, cpu_access=True)
    flag.cpu_view()[:4] = bytes(4)
    out = dev.alloc(4096)
    prg = dev.program(lib, "wait_flag")
    prg(flag, out, global_size=(1, 1, 1), local_size=(1, 1, 1))
    with pytest.raises(SignalTimeout, match="compute channel"):
        dev.synchronize(timeout_ms=300)
    flag.cpu_view()[:4] = struct.pack("<I", 5)
    dev.synchronize(timeout_ms=10_000)
    assert _down(dev, out, np.uint32, 1)[0] == 5


# A process whose channel waits on a signal nothing sets until its stdin closes.
_WAITER = textwrap.dedent(r'''
    import sys
    from runtime.drivers.nv.device import NVDevice
    dev = NVDevice("nv:0")
    sig = dev.new_signal(0)
    (dev.compute_queue() if sys.argv[1] == "compute" else dev.copy_queue()).wait(sig, 1).submit()
    print("ready", flush=True)
    sys.stdin.read()
    sig.value = 1
    dev.synchronize(timeout_ms=10_000)
    dev.close()
''')


def _launch_wait_median(dev, prg, x) -> float:  # type: ignore[no-untyped-def]
    lat = []
    for _ in range(200):
        t = time.perf_counter()
        prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
        dev.timeline_signal.wait(dev.timeline_value)
        lat.append(time.perf_counter() - t)
    return float(np.median(lat))


@pytest.mark.parametrize("engine", ["compute", "copy"])
def test_a_channel_waiting_elsewhere_does_not_hold_launches_back(  # type: ignore[no-untyped-def]
        dev, lib, engine: str) -> None:
    """A channel waiting on a signal that nothing sets, in another process (its compute or copy
    channel) or in this one (its copy channel), leaves this process's launches at their usual
    latency: the runtime's acquires switch their channel group off the engine while unmet
    (without that, every launch here took about 1 ms, the waiting group's timeslice)."""
    prg = dev.program(lib, "inc")
    x = _up(dev, np.zeros(1024, np.uint32))
    alone = _launch_wait_median(dev, prg, x)
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    proc = subprocess.Popen([sys.executable, "-c", _WAITER, engine], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env, cwd=root)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        beside = _launch_wait_median(dev, prg, x)
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    own = 0.0
    if engine == "copy":  # this process's own copy channel (the same channel group)
        gate = dev.new_signal(0)
        dev.copy_queue().wait(gate, 1).submit()
        own = _launch_wait_median(dev, prg, x)
        gate.value = 1
        dev.synchronize()
        gate.release()
    print(f"\nlaunch + wait median: alone {alone * 1e6:.2f} us, beside another process's waiting "
          f"{engine} channel {beside * 1e6:.2f} us, own copy channel waiting {own * 1e6:.2f} us")
    assert beside < 100e-6 and own < 100e-6, (alone, beside, own)
    n = 200 * (3 if engine == "copy" else 2)
    assert np.all(_down(dev, x, np.uint32, 1024) == n)


# ------------------------------------------------------------------------------------ Triton
_TRITON = textwrap.dedent(r'''
    import json, sys, numpy as np, torch, triton, triton.language as tl
    out = sys.argv[1]

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x, y = tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)
        tl.store(out_ptr + offs, x + y, mask=m)

    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, ncols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        m = offs < ncols
        x = tl.load(x_ptr + row * ncols + offs, mask=m, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * ncols + offs, e / tl.sum(e, axis=0), mask=m)

    # Integer arguments stay parameters (Triton would turn a 1 into a constant and drop it).
    @triton.jit(do_not_specialize=["M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn"])
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    g = torch.Generator(device="cuda").manual_seed(0)
    res, arrays = {}, {}
    def record(key, kern, grid, inputs, outputs, scalars):
        md = kern.metadata
        res[key] = dict(name=kern.name, cubin=kern.asm["cubin"].hex(), grid=list(grid),
                        num_warps=md.num_warps, shared=md.shared,
                        global_scratch=getattr(md, "global_scratch_size", 0) or 0,
                        profile_scratch=getattr(md, "profile_scratch_size", 0) or 0,
                        inputs=list(inputs), outputs=list(outputs), scalars=scalars)
        for k, v in {**inputs, **outputs}.items():
            arrays[f"{key}_{k}"] = v.detach().cpu().numpy()

    n = 1_000_003
    x, y = torch.rand(n, device="cuda", generator=g), torch.rand(n, device="cuda", generator=g)
    o = torch.empty_like(x)
    k = add_kernel[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
    record("add", k, (triton.cdiv(n, 1024), 1, 1), {"x": x, "y": y}, {"out": x + y}, [n])

    rows, cols = 1000, 781
    xs = torch.randn(rows, cols, device="cuda", generator=g)
    ys = torch.empty_like(xs)
    k = softmax_kernel[(rows,)](xs, ys, cols, BLOCK=1024)
    record("softmax", k, (rows, 1, 1), {"x": xs}, {"y": torch.softmax(xs, dim=1)}, [cols])

    M, N, K = 300, 260, 200
    a = torch.randn(M, K, device="cuda", generator=g, dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", generator=g, dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float32)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    k = matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                            c.stride(0), c.stride(1), BM=64, BN=64, BK=32)
    record("matmul", k, (grid[0], grid[1], 1), {"a": a, "b": b},
           {"c": (a.float() @ b.float())}, [M, N, K, K, 1, N, 1, N, 1])
    torch.cuda.synchronize()
    res["versions"] = dict(torch=torch.__version__, triton=triton.__version__)
    np.savez(out + ".npz", **arrays)
    json.dump(res, open(out + ".json", "w"))
''')


@pytest.fixture(scope="module")
def triton_kernels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("triton", reason="Triton is not installed")
    pytest.importorskip("torch", reason="PyTorch is not installed")
    base = tmp_path_factory.mktemp("triton") / "kernels"
    script = base.parent / "make_triton.py"
    script.write_text(_TRITON)
    r = subprocess.run([sys.executable, str(script), str(base)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode:
        pytest.fail(f"Triton/PyTorch reference run failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    meta = json.loads(Path(str(base) + ".json").read_text())
    arrays = dict(np.load(str(base) + ".npz"))
    print(f"\nTriton references from {meta.pop('versions')}")
    return {"meta": meta, "arrays": arrays}


def _run_triton(dev, tk: dict[str, Any],  # type: ignore[no-untyped-def]
                key: str) -> dict[str, np.ndarray]:
    m, arrays = tk["meta"][key], tk["arrays"]
    cub = bytes.fromhex(m["cubin"])
    prg = dev.program(cub, m["name"], dynamic_smem_B=m["shared"])
    bufs, outs = [], {}
    for name in m["inputs"]:
        bufs.append(_up(dev, arrays[f"{key}_{name}"]))
    for name in m["outputs"]:
        ref = arrays[f"{key}_{name}"]
        outs[name] = (dev.alloc(ref.nbytes), ref)
        bufs.append(outs[name][0])
    grid = m["grid"]
    nprog = grid[0] * grid[1] * grid[2]
    extra: list[Any] = []
    for size in (m["global_scratch"], m["profile_scratch"]):
        extra.append(dev.alloc(size * nprog) if size else 0)
    args = [*bufs, *m["scalars"]]
    args += extra[:len(prg.slots) - len(args)]
    assert len(args) == len(prg.slots), (m["name"], [s.size for s in prg.slots], len(args))
    prg(*args, global_size=tuple(grid), local_size=(m["num_warps"] * 32, 1, 1), wait=True)
    return {name: _down(dev, buf, ref.dtype, ref.size).reshape(ref.shape)
            for name, (buf, ref) in outs.items()}


def test_triton_elementwise(dev, triton_kernels) -> None:  # type: ignore[no-untyped-def]
    got = _run_triton(dev, triton_kernels, "add")
    assert np.array_equal(got["out"], triton_kernels["arrays"]["add_out"])


def test_triton_reduction_softmax(dev, triton_kernels) -> None:  # type: ignore[no-untyped-def]
    got = _run_triton(dev, triton_kernels, "softmax")
    assert np.allclose(got["y"], triton_kernels["arrays"]["softmax_y"], rtol=1e-5, atol=1e-6)


def test_triton_matmul(dev, triton_kernels) -> None:  # type: ignore[no-untyped-def]
    got = _run_triton(dev, triton_kernels, "matmul")
    assert np.allclose(got["c"], triton_kernels["arrays"]["matmul_c"], rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------------------------ faults (last)
def test_zz_fault_raises_instead_of_hanging() -> None:
    """A kernel writing far outside every mapping: the launch raises (DeviceFault from RM's error
    notifier, or SignalTimeout with the channel state) instead of hanging; close() still works.
    Runs on a device of its own, in a pytest run of its own after everything else
    (device_check.sh), so that no other device shares the process."""
    from runtime.drivers.nv.device import NVDevice
    d = NVDevice("nv:0", **_device_kwargs())
    try:
        prg = d.program(d.compiler.compile(SRC, "nv_kernels.cu"), "write_null")
        t0 = time.perf_counter()
        with pytest.raises((DeviceFault, SignalTimeout)) as e:
            prg(1 << 48, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True,
                timeout_ms=5000)
        print(f"\nraised after {time.perf_counter() - t0:.2f} s:\n{e.value}")
    finally:
        d.close()
