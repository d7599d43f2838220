"""NVIDIA launches of the documented API stay on the fast path: numpy scalars of every width
(through the native helper and the Python launch), and `wait=True` (one prebuilt timed command
stream, still returning the GPU time). Mock GPU: values and paths; the H200 figures are
scripts/bench_hcq.py --nv's."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

CUBIN = (Path(__file__).parent / "data" / "nv_kernels_cuda13.cubin").read_bytes()
SCALARS = [4, np.int8(4), np.int16(4), np.int32(4), np.int64(4), np.uint8(4), np.uint16(4),
           np.uint32(4), np.uint64(4)]


@pytest.fixture(params=["native", "python"])
def dev(request: Any) -> Iterator[Any]:
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.launcher import native_helper
    d = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    if request.param == "native" and native_helper() is None:
        d.close()
        pytest.skip("native launch helper unavailable")
    d.launch_native = request.param == "native"
    yield d
    d.close()


def test_numpy_scalars_of_every_width_take_the_fast_path(dev: Any) -> None:
    prg = dev.program(CUBIN, "inc")
    seen: list[int] = []
    dev.os.nv.gpus[0].register_kernel(prg.prog_va, lambda L: seen.append(L.param(8, "i")))
    buf = dev.alloc(64)
    g, l = (1, 1, 1), (32, 1, 1)
    short: list[Any] = []
    careful = prg._launch_short
    prg._launch_short = lambda *a: short.append(a) or careful(*a)
    for v in SCALARS:
        for _ in range(3):
            prg(buf, v, global_size=g, local_size=l)
    assert short == []  # every launch went through the slot ring's fast launch
    dev.synchronize()
    assert seen == [4] * (3 * len(SCALARS))
    # Values outside the slot's range still take the careful path, and are refused there.
    with pytest.raises(Exception, match="does not fit"):
        prg(buf, np.int64(1 << 40), global_size=g, local_size=l)
    prg(buf, np.uint32(0xFFFFFFFF), global_size=g, local_size=l)  # a same-size bit pattern
    dev.synchronize()
    assert seen[-1] == -1


def test_wait_true_is_one_timed_submission_returning_gpu_time(dev: Any) -> None:
    prg = dev.program(CUBIN, "inc")
    dev.os.nv.gpus[0].register_kernel(prg.prog_va, lambda L: None)
    buf = dev.alloc(64)
    before = dev.compute_channel.seq
    t = prg(buf, 4, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
    assert isinstance(t, float) and t >= 0.0
    assert dev.compute_channel.seq == before + 1  # one submission, not a queue per launch
    # through the shape's launch slots; the timed template is only the short path's
    assert prg._timed_commands is None and prg._hot[(1, 1, 1), (32, 1, 1)] is not None
    assert dev.timeline_signal.value == dev.timeline_value
    # Sizes as lists take the short path: one submission from the prebuilt timed command stream.
    t = prg(buf, 4, global_size=[1, 1, 1], local_size=[32, 1, 1], wait=True)
    assert isinstance(t, float) and t >= 0.0
    assert dev.compute_channel.seq == before + 2 and prg._timed_commands is not None
    assert dev.timeline_signal.value == dev.timeline_value
    # The next fast launch and a copy order themselves after it.
    prg(buf, 4, global_size=(1, 1, 1), local_size=(32, 1, 1))
    out = np.zeros(16, np.uint32)
    dev.copyout(out, buf)
