"""Device properties, memory info, copy-engine fills and the profiler on a real NVIDIA GPU (the
H200). Marked `nvidia`; skips where no NVIDIA GPU is present."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import runtime.hcq

HAVE_GPU = os.path.exists("/dev/nvidiactl") and os.path.exists("/dev/nvidia-uvm")
pytestmark = [pytest.mark.nvidia,
              pytest.mark.skipif(not HAVE_GPU, reason="no NVIDIA GPU here (/dev/nvidiactl or "
                                                      "/dev/nvidia-uvm is absent)")]
SRC = (Path(__file__).parent / "data" / "nv_kernels.cu").read_text()


@pytest.fixture(scope="module")
def dev() -> Iterator[Any]:
    from runtime.drivers.nv.device import NVDevice
    d = NVDevice("nv:0")
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


def test_properties_and_mem_info(dev: Any) -> None:
    p = dev.properties
    print(f"\n{p}")
    print("GR info (core count, SPs per SM, warp):",
          dev._gr_values(*(getattr(__import__("hcq_bindings.nv.rm_580", fromlist=["x"]), n)
                           for n in ("NV2080_CTRL_GR_INFO_INDEX_GPU_CORE_COUNT",
                                     "NV2080_CTRL_GR_INFO_INDEX_MAX_SP_PER_SM",
                                     "NV2080_CTRL_GR_INFO_INDEX_SHADER_PIPE_COUNT"))))
    assert p.vendor == "NVIDIA" and not p.mock and p.arch == dev.arch and p.simd_width == 32
    assert 16 <= p.compute_units <= 1024 and p.max_workgroup_size == 1024
    if p.name.startswith("NVIDIA H200") or p.name.startswith("NVIDIA H100 80GB HBM3"):
        assert p.compute_units == 132  # the SXM parts' enabled SMs
    assert p.memory_B > 8 << 30 and "NVIDIA" in p.name
    free0, total = dev.mem_info()
    print(f"mem_info: free {free0 / 2**30:.2f} GiB of {total / 2**30:.2f} GiB")
    assert total == p.memory_B and 0 < free0 <= total
    buf = dev.alloc(1 << 30)
    free1 = dev.mem_info().free_B
    assert free0 - free1 >= (1 << 30) - (64 << 20), (free0, free1)
    dev.free(buf)
    dev.trim_pool()


@pytest.mark.parametrize("size, offset", [(1 << 30, 0), (12345, 3), (4096, 4), (1, 7)])
def test_fill_on_the_copy_engine(dev: Any, size: int, offset: int) -> None:
    total = size + offset + 16
    buf = dev.alloc(total)
    try:
        dev.fill(buf, 0xEE)
        dev.fill(buf, 0x5A, size, offset)
        out = np.empty(total, np.uint8)
        dev.copyout(out, buf)
        assert (out[:offset] == 0xEE).all() and (out[offset + size:] == 0xEE).all()
        assert (out[offset:offset + size] == 0x5A).all()
        if offset % 4 == 0 and size % 4 == 0:
            dev.fill(buf, 0x3F800000, size, offset, width=4)
            dev.copyout(out, buf)
            assert (out[offset:offset + size].view(np.float32) == 1.0).all()
    finally:
        dev.free(buf)


def test_profile_of_launches_and_copies(dev: Any, tmp_path: Path) -> None:
    prg = dev.program(dev.compile(SRC), "vadd")
    n = 1 << 20
    a, b, c = (dev.alloc(4 * n) for _ in range(3))
    x = np.arange(n, dtype=np.float32)
    with runtime.hcq.profile() as p:
        dev.copyin(a, x)
        dev.fill(b, 0)
        for _ in range(3):
            prg(a, b, c, n, global_size=(n // 256, 1, 1), local_size=(256, 1, 1))
        out = np.empty(n, np.float32)
        dev.copyout(out, c)
    assert np.array_equal(out, x)
    gpu = [e for e in p.events if e.device == dev.name]
    kinds = [e.kind for e in gpu]
    # copyin and copyout of 4 MiB go in pieces (pipelined through the staging buffers)
    runs = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1] or k == "launch"]
    assert runs == ["copy", "fill", "launch", "launch", "launch", "copy"], kinds
    for prev, nxt in zip(gpu, gpu[1:]):
        assert prev.end_s <= nxt.start_s + 100e-6, (prev, nxt)  # one host axis (fit error)
    k = next(e for e in gpu if e.kind == "launch")
    assert k.name == "vadd" and k.args["grid"] == [n // 256, 1, 1] and 0 < k.duration_s < 0.01
    submits = [e for e in p.events if e.kind == "submit" and "vadd" in e.name]
    assert submits and submits[0].start_s <= k.start_s + 50e-6
    print("\n" + p.summary())
    p.save(tmp_path / "trace.json")
    json.loads((tmp_path / "trace.json").read_text())


def test_profiler_cost_per_launch(dev: Any) -> None:
    prg = dev.program(dev.compile(SRC), "inc")
    x = dev.alloc(4096)

    def per_launch() -> float:
        best = 1.0
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(1000):
                prg(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
            dev.synchronize()
            best = min(best, (time.perf_counter() - t) / 1000)
        return best
    per_launch()
    off = per_launch()
    with runtime.hcq.profile():
        on = per_launch()
    print(f"\n1000 launches, one wait: {off * 1e6:.2f} us/launch off, {on * 1e6:.2f} us/launch "
          f"with a profile open (+{(on - off) * 1e6:.2f} us)")
    assert dev.tracer is None


def test_hcq_device_opens_the_gpu() -> None:
    code = ("from runtime.hcq import open_device\nd = open_device(); print(d.name, "
            "d.properties.name); d.close()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, HCQ_DEVICE="nv:0"), timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("nv:0 "), r.stdout + r.stderr
