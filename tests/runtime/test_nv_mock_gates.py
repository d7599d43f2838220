"""Mock-nv's model of gates: QMDs of no grid (QMD_TYPE GRID_NULL) with a DEPENDENCE_COUNTER, loaded
by a SEND_PCAS with a copy action and counted down by dependence decrements (a grid's DEPENDENT_QMD
action DECREMENT_DEPENDENCE when it completes, or SEND_SIGNALING_PCAS2_B action
DECREMENT_DEPENDENCE); the last decrement starts the gate's dependents. What the H200 refused
(scripts/probe_nv_deps.py, docs/benchmarks.md) the mock refuses: a decrement of a gate the engine
has not loaded underflows the counter (Xid 13). Commands go to the compute channel directly, as the
probe sends them; kernels run as Python models that record the order they ran in."""
from __future__ import annotations

import time
from array import array
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.drivers.mock.nv_gpu import Launch
from runtime.drivers.mock.nv_rm import NvMockOS
from runtime.drivers.nv.device import NVDevice
from runtime.drivers.nv.gpfifo import SEM_RELEASE_WFI_TS, host_semaphore
from runtime.drivers.nv.methods import SUBC_COMPUTE, nvm
from runtime.hcq import DeviceFault, SignalTimeout

CUBIN = (Path(__file__).parent / "data" / "nv_kernels_cuda13.cubin").read_bytes()
LOAD, DECREMENT = 10, 7   # SEND_SIGNALING_PCAS2_B actions: INVALIDATE_PREFETCH_COPY_SCHEDULE, ...
SLOT_B = 512


class Rig:
    """A mock device, the `inc` kernel recording its second argument (the launch's tag) in the
    order the grids ran, and a buffer of 512-byte QMD slots."""

    def __init__(self) -> None:
        self.mos = NvMockOS.with_nv_gpus(1)
        self.dev = dev = NVDevice("mock-nv:0", os=self.mos)
        dev.default_timeout_ms = 2000.0
        self.prg = dev.program(CUBIN, "inc")
        self.ran: list[int] = []

        def model(launch: Launch) -> None:
            self.ran.append(launch.param(8, "i"))

        dev.os.nv.gpus[0].register_kernel(self.prg.prog_va, model)  # type: ignore[attr-defined]
        self.x = dev.alloc(256)
        self.slots = dev.alloc_kernargs(64 * SLOT_B + 256)
        self.base = -self.slots.va % 256
        self.qcls = dev.qmd_class
        self.m = dev.gen.compute

    def va(self, j: int) -> int:
        return self.slots.va + self.base + SLOT_B * j

    def put(self, j: int, q: Any) -> None:
        o = self.base + SLOT_B * j
        self.slots.cpu_view()[o:o + self.qcls.size_B] = q.data

    def kernel(self, j: int, tag: int, gate: int | None = None) -> None:
        """Slot j: a grid of `inc` tagged `tag`, decrementing the gate in slot `gate` when it
        completes."""
        ka = self.prg.fill_kernargs((self.x, tag), (1, 1, 1), (1, 1, 1))
        q = self.qcls(bytearray(ka.qmd))
        if gate is not None:
            q.set("DEPENDENT_QMD_ENABLE", 1, 0)
            q.set("DEPENDENT_QMD_ACTION",
                  q.value("DEPENDENT_QMD_ACTION_QMD_DECREMENT_DEPENDENCE"), 0)
            q.set("DEPENDENT_QMD0_POINTER", self.va(gate) >> 8)
        self.put(j, q)

    def gate(self, j: int, count: int, starts: int | None, **extra: int) -> None:
        """Slot j: a gate of `count` decrements that starts slot `starts`."""
        q = self.qcls()
        q.write(QMD_MAJOR_VERSION=self.qcls.major, QMD_TYPE=q.value("QMD_TYPE_GRID_NULL"),
                DEPENDENCE_COUNTER=count, **extra)
        if starts is not None:
            q.set("DEPENDENT_QMD_ENABLE", 1, 0)
            q.set("DEPENDENT_QMD_ACTION",
                  q.value("DEPENDENT_QMD_ACTION_QMD_INVALIDATE_COPY_SCHEDULE"), 0)
            q.set("DEPENDENT_QMD0_POINTER", self.va(starts) >> 8)
        self.put(j, q)

    def pcas(self, j: int, action: int) -> list[int]:
        return nvm(SUBC_COMPUTE, self.m.SEND_PCAS_A, self.va(j) >> 8) + \
            nvm(SUBC_COMPUTE, self.m.SEND_SIGNALING_PCAS2_B, self.m.pcas_action(action))

    def run(self, words: list[int]) -> None:
        """Submits `words` and a release with wait for idle after them; waits for it."""
        sig = self.dev.new_signal()
        self.dev.compute_channel.submit(
            [array("I", words + host_semaphore(sig.va, 1, SEM_RELEASE_WFI_TS))])
        sig.wait(1)

    def close(self) -> None:
        self.dev.close()


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    yield r
    r.close()


def test_a_loaded_gate_starts_its_successor_after_both_decrements(rig: Rig) -> None:
    rig.kernel(0, 1, gate=1)
    rig.gate(1, 2, starts=2)
    rig.kernel(2, 2)
    rig.run(rig.pcas(1, LOAD) + rig.pcas(0, LOAD))
    assert rig.ran == [1]  # one decrement due: the gate is pending, and the channel went idle
    rig.run(rig.pcas(1, DECREMENT))
    assert rig.ran == [1, 2]


def test_the_pushbuffer_decrement_may_come_before_the_grid_completes(rig: Rig) -> None:
    rig.kernel(0, 1, gate=1)
    rig.gate(1, 2, starts=2)
    rig.kernel(2, 2)
    rig.run(rig.pcas(1, LOAD) + rig.pcas(1, DECREMENT))
    assert rig.ran == []
    rig.run(rig.pcas(0, LOAD))
    assert rig.ran == [1, 2]


def test_a_gate_with_no_dependences_runs_at_once_and_starts_its_successor(rig: Rig) -> None:
    rig.gate(0, 0, starts=1)
    rig.kernel(1, 7)
    rig.run(rig.pcas(0, LOAD))
    assert rig.ran == [7]


def _fault(rig: Rig, words: list[int], match: str) -> None:
    with pytest.raises((DeviceFault, SignalTimeout)):
        rig.run(words)
    log = "\n".join(rig.mos.kernel_log())
    assert "Xid" in log and match in log, log


def test_a_decrement_of_a_gate_not_loaded_underflows(rig: Rig) -> None:
    # what the H200 did (Xid 13, SKEDCHECK36_DEPENDENCE_COUNTER_UNDERFLOW)
    rig.kernel(0, 1, gate=1)
    rig.gate(1, 2, starts=2)
    rig.kernel(2, 2)
    _fault(rig, rig.pcas(0, LOAD), "dependence counter underflow")
    assert rig.ran == [1]


def test_a_pushbuffer_decrement_of_a_gate_not_loaded_underflows(rig: Rig) -> None:
    rig.gate(1, 2, starts=None)
    _fault(rig, rig.pcas(1, DECREMENT), "dependence counter underflow")


def test_only_gates_take_decrements(rig: Rig) -> None:
    rig.kernel(0, 1)
    _fault(rig, rig.pcas(0, DECREMENT), "is not GRID_NULL")
    assert rig.ran == []


def test_a_gate_loaded_again_while_pending_is_refused(rig: Rig) -> None:
    # the H200 starts the count over; a protocol that relied on it would be broken
    rig.gate(1, 2, starts=None)
    _fault(rig, rig.pcas(1, LOAD) + rig.pcas(1, DECREMENT) + rig.pcas(1, LOAD),
           "sent or started again while it waits")


def test_a_gate_may_set_only_the_gate_fields(rig: Rig) -> None:
    rig.gate(1, 2, starts=None, SELF_COPY_ON_COMPLETION=1)
    _fault(rig, rig.pcas(1, LOAD), "SELF_COPY_ON_COMPLETION")


def test_a_gate_started_by_a_link_while_it_counts_is_refused(rig: Rig) -> None:
    rig.gate(0, 0, starts=1)
    rig.gate(1, 1, starts=None)
    _fault(rig, rig.pcas(0, LOAD), "started by another QMD's link")


def _wait_ran(r: Rig, count: int) -> None:
    deadline = time.monotonic() + 5
    while len(r.ran) < count:
        assert time.monotonic() < deadline, f"{len(r.ran)} grids ran, waiting for {count}"
        time.sleep(0.0005)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 24), ring=st.integers(2, 6),
       delay=st.lists(st.booleans(), min_size=24, max_size=24))
def test_a_ring_of_gates_runs_launches_once_each_in_order(n: int, ring: int,
                                                          delay: list[bool]) -> None:
    """The probe's gate ring: launch i's QMD in slot i % ring, its gate in slot ring + i % ring,
    starting slot (i + 1) % ring; launch i's submission loads its own gate, then decrements its
    predecessor's (launch 0 is sent instead); the last gate is closed by a null QMD. Each launch
    its own submission; a slot and its gate are rewritten once the launch after their last user
    ran (its gate fired), and with `delay[i]` launch i is submitted only after launch i - 1 ran."""
    r = Rig()
    try:
        for i in range(n):
            j, g = i % ring, ring + i % ring
            _wait_ran(r, i if delay[i] else i - ring + 2)
            r.kernel(j, 100 + i, gate=g)
            r.gate(g, 2, starts=(i + 1) % ring)
            words = r.pcas(g, LOAD) + (r.pcas(j, LOAD) if i == 0 else
                                       r.pcas(ring + (i - 1) % ring, DECREMENT))
            r.dev.compute_channel.submit([array("I", words)])
        _wait_ran(r, n - ring + 1)
        r.gate(n % ring, 0, starts=None)
        r.run(r.pcas(ring + (n - 1) % ring, DECREMENT))
        assert r.ran == [100 + i for i in range(n)]
        assert not r.dev.os.nv.gpus[0].gates  # type: ignore[attr-defined]
    finally:
        r.close()


def test_the_predecessors_gate_must_not_fire_before_the_successors_gate_is_loaded(
        rig: Rig) -> None:
    """Why a launch loads its own gate before it decrements its predecessor's: the decrement may
    start the launch at once, and its grid's decrement would then find its gate not loaded."""
    rig.kernel(0, 1, gate=2)
    rig.kernel(1, 2, gate=3)
    rig.gate(2, 2, starts=1)
    rig.gate(3, 2, starts=None)
    rig.run(rig.pcas(2, LOAD) + rig.pcas(0, LOAD))
    _fault(rig, rig.pcas(2, DECREMENT) + rig.pcas(3, LOAD), "dependence counter underflow")
    assert rig.ran == [1, 2]


def test_gates_run_the_probe_mechanism_without_leaving_state(rig: Rig) -> None:
    """Closing a chain's last gate leaves the engine with no gate pending."""
    rig.kernel(0, 1, gate=1)
    rig.gate(1, 2, starts=2)
    rig.gate(2, 0, starts=None)
    rig.run(rig.pcas(1, LOAD) + rig.pcas(0, LOAD) + rig.pcas(1, DECREMENT))
    assert rig.ran == [1]
    assert not rig.dev.os.nv.gpus[0].gates  # type: ignore[attr-defined]
