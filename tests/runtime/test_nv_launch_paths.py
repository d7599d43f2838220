"""The NVIDIA launch is one description with two executors: the launch helper in C
(runtime/drivers/nv/_nvlaunch.c) is an accelerator of the Python launch, so the same script of
launches leaves the same bytes in the same places with the helper on and off: launch slots
(constant bank 0, parameters, QMD, command segments), pushbuffer, GPFIFO ring, USERD's GP_PUT,
the channel's and device's submission words, signal values, and what the mock GPU decoded from
every launch. The queue path and the hot path build the same launch block (one QMD builder), and
the launch fence is one method that every route emits."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.drivers.mock.nv_gpu import Launch
from runtime.drivers.mock.nv_rm import NvMockOS
from runtime.drivers.nv.device import NVDevice
from runtime.drivers.nv.launcher import native_helper
from runtime.hcq import native

CUBIN = (Path(__file__).parent / "data" / "nv_kernels_cuda13.cubin").read_bytes()


def _script(launch_native: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Runs one fixed script of launches on a fresh deterministic mock GPU; returns everything
    the launches wrote that the GPU reads, and what the GPU decoded."""
    monkeypatch.setenv("HCQ_MOCK_SYNC", "1")
    mos = NvMockOS.with_nv_gpus(1)
    d = NVDevice("mock-nv:0", os=mos, pushbuf_B=16384, gpfifo_entries=16)
    d.launch_native = launch_native
    seen: list[tuple[Any, ...]] = []

    def model(launch: Launch) -> None:
        seen.append((launch.program_va, launch.grid, launch.block, launch.cb0_va, launch.cb0,
                     sorted(launch.qmd.items())))
    try:
        gpu = d.os.nv.gpus[0]  # type: ignore[attr-defined]
        vadd, many, inc = (d.program(CUBIN, k) for k in ("vadd", "many_params", "inc"))
        for p in (vadd, many, inc):
            gpu.register_kernel(p.prog_va, model)
        a, b, c = (d.alloc(4096) for _ in range(3))
        d.copyin(a, np.arange(1024, dtype=np.float32))
        for i in range(40):  # wraps the slot ring and the 16-entry GPFIFO
            vadd(a, b, c, 100 + i, global_size=(2, 1, 1), local_size=(64, 1, 1))
            if i % 7 == 3:  # work of another channel breaks the chain: the next launch acquires
                d.copyin(b, np.full(1024, i, np.float32))
            if i % 5 == 0:
                vadd(a, b, c, np.int32(i), global_size=(2, 1, 1), local_size=(64, 1, 1))
            if i % 6 == 0:
                many(a, -3, 300, 70000, -(1 << 40), 1.5, 2.25, 7, -8, 3.125, -0.5, 200,
                     1 << 50, -12, 99, 0.75, -1e300, global_size=(1, 2, 1),
                     local_size=(32, 1, 1))
            if i % 9 == 0:
                inc(a, 0xFFFFFFFF, global_size=(1, 1, 1), local_size=(32, 1, 1))  # careful path
                vadd(a, b, c, 5, global_size=(2, 1, 1), local_size=(64, 1, 1), wait=True)
        d.synchronize()
        ch = d.compute_channel
        out: dict[str, Any] = {
            "device_words": d.words.tolist(), "channel_words": ch.state.tolist(),
            "records": ch.records.tolist(), "ring": ch.ring.tolist(),
            "gp_put": ch.userd[0x8C // 4], "pushbuffer": ch.pb.tolist(),
            "timeline": d.timeline_signal.value, "progress": ch.progress.value,
            "launches": seen, "launch_count": gpu.launch_count,
        }
        for p in (vadd, many, inc):
            for shape, hot in sorted(p._hot.items()):
                if hot is not None:
                    off = hot.chunk_off
                    out[f"{p.name} {shape} slots"] = bytes(hot.buf.cpu_view()[off:off + (64 << 10)])
                    out[f"{p.name} {shape} state"] = hot.state.tolist()
        return out
    finally:
        d.close()


def test_the_native_launch_and_the_python_launch_write_the_same_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if native_helper() is None:
        pytest.skip(f"native launch helper unavailable: {native.unavailable}")
    with_c = _script(True, monkeypatch)
    without = _script(False, monkeypatch)
    assert with_c["launch_count"] == without["launch_count"] == 65
    assert with_c.keys() == without.keys()
    for key in with_c:
        assert with_c[key] == without[key], key
