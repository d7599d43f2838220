"""Runs of PM4 packets the mock command processor has seen before run by a plan decoded once
(`PM4Processor._replay`): what they do must be what the fetch loop does packet by packet, for
every launch, and a packet that faults or must wait does so as it would there."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.drivers.mock import amd_pm4
from runtime.drivers.mock.os import MockOS
from runtime.hcq import AMDDevice, DeviceFault
from runtime.hcq.queue import extend_from

DATA = Path(__file__).parent / "data"
VECTOR_ADD = (DATA / "amd_reference" / "vector_add.hsaco").read_bytes()
SHAPES = [((4, 1, 1), (256, 1, 1)), ((2, 3, 1), (8, 4, 2)), ((1, 1, 1), (64, 1, 1))]
N = 1024


def _device(plans: bool, monkeypatch: pytest.MonkeyPatch,
            replayed: list[int] | None = None) -> tuple[AMDDevice, Any]:
    """A deterministic mock device (queues run in the doorbell), with or without plans; the
    dwords each replay ran go to `replayed`."""
    if not plans:
        monkeypatch.setattr(amd_pm4.PM4Processor, "_replay", lambda self, dws, pos: (0, False))
    elif replayed is not None:
        replay = amd_pm4.PM4Processor._replay

        def counted(self: Any, dws: list[int], pos: int) -> tuple[int, bool]:
            ran, waits = replay(self, dws, pos)
            replayed.append(ran)
            return ran, waits

        monkeypatch.setattr(amd_pm4.PM4Processor, "_replay", counted)
    mos = MockOS.with_amd_gpus(1)
    for d in mos.drivers:
        for g in d.gpus:
            g.sync = True
    dev = AMDDevice("amd:0", os=mos)
    return dev, mos.drivers[0].gpus[0]


def _compute(gpu: Any) -> Any:
    return next(q for q in gpu.queues.values() if isinstance(q, amd_pm4.PM4Processor))


def _launches(plans: bool, steps: list[tuple[int, int, int, bool]]) -> tuple[Any, ...]:
    """Runs `steps` (shape, input pair, output, wait) of vector_add: what the GPU was left
    with (outputs, the dispatch log, SH registers, read pointer) and the dwords replayed."""
    replayed: list[int] = []
    with pytest.MonkeyPatch.context() as m:
        dev, gpu = _device(plans, m, replayed)
        try:
            prg = dev.program(VECTOR_ADD, "vector_add")
            bufs = [dev.alloc(4 * N) for _ in range(4)]
            for i, b in enumerate(bufs):
                dev.copyin(b, np.arange(N, dtype=np.float32) * (i + 1))
            q = _compute(gpu)
            for shape, src, dst, wait in steps:
                g, l = SHAPES[shape]
                prg(bufs[src], bufs[(src + 1) % 4], bufs[dst], global_size=g, local_size=l,
                    wait=wait)
            dev.synchronize()
            outs = []
            for b in bufs:
                out = np.empty(N, np.float32)
                dev.copyout(out, b)
                outs.append(out.tobytes())
            log = [(e.record, e.stats) for e in gpu.dispatches]
            return outs, log, dict(q.sh), q.rptr_dw, sum(replayed)
        finally:
            dev.close()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 3),
                          st.booleans()), min_size=3, max_size=12))
def test_a_planned_run_does_what_the_packets_do(steps: list[tuple[int, int, int, bool]]) -> None:
    steps = [steps[0]] * 3 + steps   # (a shape seen three times: planned, then replayed)
    with_plans = _launches(True, steps)
    assert with_plans[4], "no run was replayed"
    assert with_plans[:4] == _launches(False, steps)[:4]


def _signals(dev: AMDDevice, a: Any, b: Any, va_b: int | None = None) -> list[int]:
    """A run of packets: an invalidating barrier, a release of 1 to `a`, one of 2 to `b` (or
    to `va_b`), each with its interrupt (a second RELEASE_MEM)."""
    q = dev.compute_queue().memory_barrier().signal(a, 1).signal(b, 2)
    dws = q.dwords()
    if va_b is not None:   # the address dwords of b's release (the last but one packet)
        i = len(dws) - 16 + 3
        dws[i], dws[i + 1] = va_b & 0xFFFFFFFF, va_b >> 32
    return dws


@pytest.mark.parametrize("plans", [True, False])
def test_a_planned_packet_faults_as_it_would_alone(plans: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run three times (planned at the second, replayed at the third), then with a
    misaligned release address: the queue's report names that packet either way."""
    dev, gpu = _device(plans, monkeypatch)
    try:
        a, b = dev.new_signal(0), dev.new_signal(0)
        for _ in range(3):
            q = dev.compute_queue()
            extend_from(q, _signals(dev, a, b))
            q.submit()
        assert a.value == 1 and b.value == 2
        proc = _compute(gpu)
        assert bool(proc._plans) == plans
        at = proc.rptr_dw + len(_signals(dev, a, b)) - 16
        q = dev.compute_queue()
        extend_from(q, _signals(dev, a, b, b.va + 4))
        q.submit()
        with pytest.raises(DeviceFault) as ei:
            dev.synchronize()
        report = str(ei.value)
        assert f"compute queue 1 at ring dword {at}: ring dword {at}: RELEASE_MEM 64-bit " \
               f"address {b.va + 4:#x} is not 8-byte aligned" in report, report
        assert "PACKET3_RELEASE_MEM event_type=0x14" in report and f"addr={b.va + 4:#x}" in report
    finally:
        dev.close()


def test_a_planned_wait_stops_the_run_and_resumes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose wait cannot pass yet runs up to the wait, which stays the current packet;
    the rest runs once the wait passes."""
    dev, gpu = _device(True, monkeypatch)
    try:
        a, b, gate = dev.new_signal(0), dev.new_signal(0), dev.new_signal(0)
        q = _compute(gpu)
        for v in (1, 2, 3):
            cmds = dev.compute_queue().memory_barrier().signal(a, v).wait(gate, v) \
                .signal(b, v).signal(a, 10 * v)
            if v < 3:
                gate.value = v
            cmds.submit()
            if v < 3:
                assert (a.value, b.value) == (10 * v, v)
        assert q._plans and q.blocked is not None and "WAIT_REG_MEM" in q.blocked
        assert (a.value, b.value) == (3, 2)   # the release before the wait, not those after
        gate.value = 3
        dev.synchronize()
        assert (a.value, b.value) == (30, 3) and q.blocked is None
    finally:
        dev.close()


def _wait_report(plans: bool, bad_va: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """The queue's report for a run (a barrier, a release, a wait that passes, a release) seen
    three times, then run with the wait's address replaced by `bad_va(gate)`."""
    dev, gpu = _device(plans, monkeypatch)
    try:
        a, b, gate = dev.new_signal(0), dev.new_signal(0), dev.new_signal(0)
        at_wait = len(dev.compute_queue().memory_barrier().signal(a, 1).dwords())

        def run(va: int | None) -> None:
            dws = dev.compute_queue().memory_barrier().signal(a, 1).wait(gate, 0) \
                .signal(b, 2).dwords()
            if va is not None:   # the address dwords of the wait
                dws[at_wait + 2], dws[at_wait + 3] = va & 0xFFFFFFFF, va >> 32
            q = dev.compute_queue()
            extend_from(q, dws)
            q.submit()

        for _ in range(3):
            run(None)
        assert (a.value, b.value) == (1, 2)
        assert bool(_compute(gpu)._plans) == plans
        run(bad_va(gate))
        with pytest.raises(DeviceFault) as ei:
            dev.synchronize()
        return str(ei.value)
    finally:
        dev.close()


@pytest.mark.parametrize("bad_va", [lambda gate: gate.va + 2, lambda gate: 0xDEAD0000],
                         ids=["misaligned", "unmapped"])
def test_a_planned_wait_faults_as_it_would_alone(bad_va: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A wait run by a plan whose address is misaligned or unmapped is reported as the fetch
    loop reports it: the same text, naming the WAIT_REG_MEM packet and its ring dword."""
    planned = _wait_report(True, bad_va, monkeypatch)
    with pytest.MonkeyPatch.context() as m:
        alone = _wait_report(False, bad_va, m)
    assert planned == alone
    assert "WAIT_REG_MEM" in planned and "ring dword" in planned, planned
