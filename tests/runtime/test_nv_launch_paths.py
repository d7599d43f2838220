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


def test_the_launch_fence_is_one_method_every_route_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A different fence in `NVComputeQueue.launch_fence` (here the host's WFI) reaches the hot
    path's segments, queues with several launches and graph bodies, and no route emits the old
    one (the compute class's WAIT_FOR_IDLE) on its own; the launches still run in order."""
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.methods import SUBC_COMPUTE, SUBC_HOST, decode_gp_entry, nvm
    from runtime.drivers.nv.queue import NVComputeQueue
    from runtime.hcq import Launch as GraphLaunch

    def host_wfi(self: NVComputeQueue) -> NVComputeQueue:
        self.words.extend(nvm(SUBC_HOST, cl.NVC56F_WFI, 0))
        return self

    monkeypatch.setattr(NVComputeQueue, "launch_fence", host_wfi)
    mos = NvMockOS.with_nv_gpus(1)
    d = NVDevice("mock-nv:0", os=mos)
    try:
        marker = nvm(SUBC_HOST, cl.NVC56F_WFI, 0)
        old = nvm(SUBC_COMPUTE, d.gen.compute.WAIT_FOR_IDLE, 0)

        def count(words: list[int], pattern: list[int]) -> int:
            return sum(words[i:i + len(pattern)] == pattern for i in range(len(words)))

        inc = d.program(CUBIN, "inc")
        gpu = d.os.nv.gpus[0]  # type: ignore[attr-defined]
        gpu.register_kernel(inc.prog_va, lambda L: L.array(L.param(0, "Q"), np.uint32,
                                                           L.param(8, "i")).__iadd__(1))
        x = d.alloc(256)
        d.copyin(x, np.zeros(64, np.uint32))
        for _ in range(3):  # hot path: the chained entries start at the fence
            inc(x, 64, global_size=(1, 1, 1), local_size=(64, 1, 1))
        hot = inc._hot[(1, 1, 1), (64, 1, 1)]
        assert hot is not None
        words = hot.buf.cpu_view().cast("I")
        seg = words[hot.layout.acquire_idx[0] - 3:hot.layout.seq_idx[0] + 3].tolist()
        assert count(seg, marker) == 1 and count(seg, old) == 0
        fence_va = hot.segment_va(1) + 4 * 6  # past the acquire (six dwords)
        assert decode_gp_entry(hot.layout.entry_chained[1])[0] == fence_va
        ka = [inc.fill_kernargs((x, 64), (1, 1, 1), (64, 1, 1)) for _ in range(2)]
        q = d.compute_queue()
        for k in ka:
            q.exec(inc, k, (1, 1, 1), (64, 1, 1))
        assert count(q.dwords(), marker) == 1 and count(q.dwords(), old) == 0
        g = d.graph([GraphLaunch(inc, (x, 64), (1, 1, 1), (64, 1, 1))] * 3)
        bodies = [s for s in g._segments if isinstance(s, NVComputeQueue)]
        assert len(bodies) == 1
        assert count(bodies[0].dwords(), marker) == 2 and count(bodies[0].dwords(), old) == 0
        g.replay(wait=True)
        d.synchronize()
        out = np.zeros(64, np.uint32)
        d.copyout(out, x)
        assert (out == 6).all()
        g.free()
    finally:
        d.close()
