"""How a host waits for an asynchronous mock GPU, and what a mock launch costs besides the kernel.

A waiter blocks until the GPU's thread says it made progress (no polling), the GPU's thread runs
one pass per doorbell, waits on a mock device do not spin (a spinning host holds the GIL the GPU's
thread needs), and what the mocks remember between launches (checked QMDs, compiled PTX kernels)
is checked again when the memory it came from changes. Both mocks are forced into the
asynchronous mode here, whatever HCQ_MOCK_SYNC says.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.drivers.mock.nv_rm import NvMockOS
from runtime.drivers.mock.os import MockOS
from runtime.drivers.nv.device import NVDevice
from runtime.hcq import AMDDevice, Device, DeviceFault
from runtime.hcq.signal import SPIN_S

DATA = Path(__file__).parent / "data"
CUBIN = (DATA / "nv_kernels_cuda13.cubin").read_bytes()
# Far longer than any wait here takes: a waiter that is not woken fails by the clock.
LONG_S = 30.0


def _async(mos: MockOS) -> MockOS:
    for d in mos.drivers:
        for g in d.gpus:
            g.sync = False
    return mos


def _amd() -> tuple[Device, Any]:
    mos = _async(MockOS.with_amd_gpus(1))
    d = AMDDevice("amd:0", os=mos)
    d.default_timeout_ms = 10_000.0
    return d, mos.drivers[0].gpus[0]


def _nv() -> tuple[Device, Any]:
    mos = _async(NvMockOS.with_nv_gpus(1))
    d = NVDevice("mock-nv:0", os=mos)
    d.default_timeout_ms = 10_000.0
    return d, mos.drivers[0].gpus[0]


@pytest.fixture(params=["amd", "nv"])
def dev_gpu(request: pytest.FixtureRequest) -> Iterator[tuple[Device, Any]]:
    d, gpu = (_amd if request.param == "amd" else _nv)()
    yield d, gpu
    d.close()


def _pending_signal(d: Device) -> tuple[Any, int]:
    """A signal the GPU will set to 1 once the work queued before it (a wait for a gate the host
    opens) has run."""
    gate, sig = d.new_signal(0), d.new_signal(0)
    d.compute_queue().wait(gate, 1).signal(sig, 1).submit()
    return gate, sig


# ------------------------------------------------------------------ the waiter's wake-up
def test_sleep_for_gpu_returns_at_once_when_ready() -> None:
    mos = MockOS()
    t = time.perf_counter()
    mos.sleep_for_gpu(LONG_S, lambda: True)
    assert time.perf_counter() - t < LONG_S / 2


def test_wake_waiters_releases_a_sleeping_host_thread() -> None:
    mos = MockOS()
    done = threading.Event()
    flag = [False]

    def waiter() -> None:
        mos.sleep_for_gpu(LONG_S, lambda: flag[0])
        done.set()

    th = threading.Thread(target=waiter, daemon=True)
    th.start()
    while not mos._gpu_waiters:  # the waiter is registered (and about to block)
        time.sleep(0.001)
    flag[0] = True
    mos.wake_waiters()
    assert done.wait(LONG_S / 2), "the waiter slept on although it was woken"
    th.join()
    assert not mos._gpu_waiters


def test_progress_made_before_the_waiter_blocks_is_not_lost() -> None:
    # The GPU finishes between the waiter's registration and its block: ready() sees it then.
    mos = MockOS()
    flag = [False]

    def ready() -> bool:
        flag[0] = True  # "the GPU finished just now", before the waiter would block
        mos.wake_waiters()
        return False

    t = time.perf_counter()
    mos.sleep_for_gpu(LONG_S, ready)
    assert time.perf_counter() - t < LONG_S / 2 and flag[0]


def test_the_gpu_thread_wakes_a_waiter_when_the_work_is_done(dev_gpu: tuple[Device, Any]
                                                             ) -> None:
    d, gpu = dev_gpu
    gate, sig = _pending_signal(d)
    d.os.wait_idle()  # type: ignore[attr-defined]
    assert sig.value == 0  # held back by the gate
    gate.value = 1
    # A host store releases the queue at the GPU's next poll; the GPU then wakes this thread.
    t = time.perf_counter()
    d.os.sleep_for_gpu(LONG_S, lambda: sig.value >= 1)  # type: ignore[attr-defined]
    assert sig.value == 1 and time.perf_counter() - t < LONG_S / 2


def test_a_launch_and_wait_runs_one_gpu_pass_per_doorbell(dev_gpu: tuple[Device, Any]) -> None:
    d, gpu = dev_gpu
    sig = d.new_signal(0)
    for i in range(5):  # warm: queues made, caches filled
        d.compute_queue().signal(sig, i + 1).submit()
        sig.wait(i + 1)
    n, before = 40, gpu.engine.steps
    for i in range(5, 5 + n):
        d.compute_queue().signal(sig, i + 1).submit()
        sig.wait(i + 1)
    # One pass each (two before: a pass that made progress was always followed by an empty one);
    # a doorbell rung while a pass runs may add one.
    assert gpu.engine.steps - before <= n * 3 // 2


def test_a_waiter_runs_the_pass_its_doorbell_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU thread at all: the doorbell returns with nothing done (asynchronous), and the wait
    # runs the GPU's pass on the waiting thread instead of sleeping until a thread does it.
    for vendor in ("amd", "nv"):
        mos = _async(MockOS.with_amd_gpus(1) if vendor == "amd" else NvMockOS.with_nv_gpus(1))
        gpu = mos.drivers[0].gpus[0]
        monkeypatch.setattr(gpu.engine, "_start", lambda: None)
        d: Device = AMDDevice("amd:0", os=mos) if vendor == "amd" else \
            NVDevice("mock-nv:0", os=mos)
        try:
            sig = d.new_signal(0)
            d.compute_queue().signal(sig, 1).submit()
            assert sig.value == 0  # the doorbell ran nothing
            steps = gpu.engine.steps
            sig.wait(1, timeout_ms=LONG_S * 1000)
            assert sig.value == 1 and gpu.engine.steps > steps
            assert gpu.engine._thread is None
        finally:
            d.close()


def test_a_pass_a_waiter_runs_that_leaves_a_queue_blocked_wakes_the_gpu_thread() -> None:
    from runtime.drivers.mock.engine import EngineThread
    lock = threading.RLock()
    outcome = [(True, True, True)]  # (progress, blocked, alive) of the next pass
    ran: list[threading.Thread] = []

    def step() -> tuple[bool, bool, bool]:
        ran.append(threading.current_thread())
        return outcome[0]

    e = EngineThread("test-gpu", lock, step)
    starts: list[int] = []
    e._start = lambda: starts.append(1)  # type: ignore[method-assign]  # no thread: count them
    assert not e.run_kicked_here()  # nothing kicked: nothing to run
    e.kick()
    assert starts == [1]
    with lock:
        assert e.run_kicked_here()
    assert ran == [threading.current_thread()]
    # The queue is blocked: the GPU's thread polls it from now on, not the waiter.
    assert starts == [1, 1] and not e._wake.locked()
    with lock:
        assert not e.run_kicked_here()
    outcome[0] = (True, False, True)
    e.kick()
    with lock:
        assert e.run_kicked_here()
    assert len(starts) == 3 and e._wake.locked()  # all done: the thread is left asleep


def test_the_host_runs_the_passes_of_a_launch_and_wait_loop() -> None:
    # The GPU's thread is not woken by each doorbell while it polls for kicks: the waiting host
    # runs the pass, with no hand-off of the GIL (a thread woken by each doorbell took the GIL
    # whenever the host's pass let go of it, in numpy, and then a third of the passes).
    d, gpu = _amd()
    try:
        prg: Any = d.program((DATA / "amd_reference" / "vector_add.hsaco").read_bytes(),
                             "vector_add")
        a = d.alloc(4096)
        by_thread: list[bool] = []
        step = gpu.engine._step

        def counted() -> tuple[bool, bool, bool]:
            by_thread.append(threading.current_thread() is not threading.main_thread())
            return step()  # type: ignore[no-any-return]

        gpu.engine._step = counted
        for _ in range(200):
            prg(a, a, a, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)
        # (a host descheduled between its doorbell and its wait may leave a few to the thread)
        assert sum(by_thread) <= len(by_thread) // 4
    finally:
        d.close()


@pytest.mark.parametrize("linger_s", [0.0, 0.05])
def test_a_kick_no_host_waits_for_is_run_by_the_gpu_thread(dev_gpu: tuple[Device, Any],
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           linger_s: float) -> None:
    # Whether the thread sleeps (woken by the kick) or polls for kicks (it takes one that no
    # waiting host ran soon), the work completes while the host only reads memory.
    import runtime.drivers.mock.engine as engine
    monkeypatch.setattr(engine, "_LINGER_S", linger_s)
    d, gpu = dev_gpu
    sig = d.new_signal(0)
    for i in range(3):
        d.compute_queue().signal(sig, i + 1).submit()
        deadline = time.perf_counter() + LONG_S
        while sig.value < i + 1 and time.perf_counter() < deadline:
            time.sleep(0.0005)
        assert sig.value == i + 1
        time.sleep(linger_s and 0.002)  # now polling (or asleep) again


@pytest.mark.parametrize("linger", [False, True], ids=["asleep", "polling"])
@pytest.mark.parametrize("vendor", ["amd", "nv"])
def test_closing_the_device_ends_the_gpu_thread(vendor: str, linger: bool) -> None:
    """The GPU's thread slept on after the device closed (nothing woke it to see that no queue
    was left), one idle thread per mock GPU for the rest of the process; it ends now, whether
    it was asleep or still polling for kicks, and a device opened later starts a new one."""
    d, gpu = (_amd if vendor == "amd" else _nv)()
    gate, sig = _pending_signal(d)
    gate.value = 1
    d.os.sleep_for_gpu(LONG_S, lambda: sig.value >= 1)  # type: ignore[attr-defined]
    thread = gpu.engine._thread
    assert thread is not None and thread.is_alive()
    if not linger:
        deadline = time.monotonic() + LONG_S
        while not gpu.engine._asleep and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gpu.engine._asleep
    d.close()
    thread.join(LONG_S)
    assert not thread.is_alive()


def test_waits_on_a_mock_device_do_not_spin(dev_gpu: tuple[Device, Any]) -> None:
    d, _ = dev_gpu
    assert d.wait_spin_s == 0.0
    assert Device.wait_spin_s == SPIN_S  # a device on a real seam polls first


def test_a_wait_on_a_mock_device_runs_the_pass_without_reading_the_value_first(
        dev_gpu: tuple[Device, Any]) -> None:
    # A device that does not spin reads the value once and goes on to run the GPU's pass:
    # a round of polls before it would only read a value nothing can change meanwhile.
    d, _ = dev_gpu
    sig = d.new_signal(0)
    reads: list[int] = []

    class Counted:
        def __init__(self, words: Any) -> None:
            self.words = words

        def __getitem__(self, i: int) -> int:
            reads.append(i)
            return int(self.words[i])

    # What is counted is the reads before the wait first offers to run the pass: the reads
    # after it depend on whether the GPU's own thread had the pass already, and on its wake-ups.
    before_pass: list[int] = []
    run_here = d.os.run_gpus_here

    def counted_run_here() -> bool:
        before_pass.append(len(reads))
        return run_here()

    words = sig._u64
    d.compute_queue().signal(sig, 1).submit()
    sig._u64 = Counted(words)  # type: ignore[assignment]
    d.os.run_gpus_here = counted_run_here  # type: ignore[method-assign]
    try:
        sig.wait(1, timeout_ms=LONG_S * 1000)
    finally:
        sig._u64 = words
        del d.os.run_gpus_here
    # one read, then the pass (or, where the GPU's thread finished first, one read and done)
    assert sig.value == 1
    assert before_pass[:1] == [1] or (before_pass == [] and reads == [0]), (reads, before_pass)


# ------------------------------------------------------------------ what the NVIDIA mock remembers
@pytest.fixture
def nv() -> Iterator[tuple[NVDevice, Any]]:
    d, gpu = _nv()
    yield d, gpu  # type: ignore[misc]
    d.close()


def _launch_block(d: NVDevice, gpu: Any) -> tuple[Any, Any]:
    prg: Any = d.program(CUBIN, "vadd")
    gpu.register_kernel(prg.prog_va, lambda launch: None)
    a = d.alloc(64)
    ka = prg.fill_kernargs((a, a, a, 1), (1, 1, 1), (32, 1, 1))
    return prg, ka


def _submit(d: NVDevice, prg: Any, ka: Any) -> None:
    v = d.next_timeline()
    # after the work before it (the upload of the program on the copy channel)
    d.compute_queue().wait(d.timeline_signal, v - 1).exec(prg, ka, (1, 1, 1), (32, 1, 1)) \
        .signal(d.timeline_signal, v).submit()
    d.synchronize(timeout_ms=5000)


def test_a_remembered_qmd_still_has_its_constant_bank_checked(nv: tuple[NVDevice, Any]) -> None:
    d, gpu = nv
    prg, ka = _launch_block(d, gpu)
    _submit(d, prg, ka)
    _submit(d, prg, ka)  # the same QMD again: its fixed fields were checked once
    gpu.mem.write_u32(gpu.launches[-1].cb0_va, 7)  # cb0's blockDim.x no longer the QMD's
    with pytest.raises(DeviceFault, match=r"cb0 blockDim \(7, 1, 1\)"):
        _submit(d, prg, ka)


def test_a_remembered_qmd_is_checked_again_when_the_mappings_change(nv: tuple[NVDevice, Any]
                                                                    ) -> None:
    d, gpu = nv
    prg, ka = _launch_block(d, gpu)
    _submit(d, prg, ka)
    m = next(m for m in gpu.mem.mappings() if m.va <= prg.prog_va < m.end)
    gpu.mem.unmap(m.va)  # the program's memory is gone (as after a free)
    try:
        with pytest.raises(DeviceFault, match="program address .* is not mapped"):
            _submit(d, prg, ka)
    finally:
        gpu.mem.map(m.va, len(m.data), m.data)  # for the driver's own free at close


def _nvrtc_missing() -> str | None:
    try:
        from runtime.drivers.nv.compiler import find_nvrtc
        find_nvrtc()
    except Exception as e:  # noqa: BLE001 - any reason NVRTC cannot load
        return str(e)
    return None


@pytest.mark.skipif(_nvrtc_missing() is not None, reason="NVRTC is not installed")
def test_code_written_over_a_launched_ptx_program_is_what_runs_next(nv: tuple[NVDevice, Any]
                                                                    ) -> None:
    d, gpu = nv
    src = 'extern "C" __global__ void put(unsigned int *x) {{ x[0] = {}u; }}'
    p1: Any = d.program(d.compiler.compile(src.format(111)), "put")
    p2: Any = d.program(d.compiler.compile(src.format(222)), "put")
    out = d.alloc(64)
    got = np.zeros(1, np.uint32)
    p1(out, wait=True)
    d.copyout(got, out)
    assert got[0] == 111
    n = p1.lib_buf.size
    assert p2.lib_buf.size == n and p2.prog_va - p2.lib_buf.va == p1.prog_va - p1.lib_buf.va
    gpu.mem.write(p1.lib_buf.va, gpu.mem.read(p2.lib_buf.va, n))  # p2's image over p1's
    p1(out, wait=True)
    d.copyout(got, out)
    assert got[0] == 222


def test_a_fault_check_right_after_a_wait_for_every_event_asks_no_second_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.drivers.amd.device as amd_device
    monkeypatch.setattr(amd_device, "_EVENTS_FRESH_S", LONG_S)  # "right after", on any machine
    d, _ = _amd()
    try:
        sig = d.new_signal(0)
        d.sleep_for_signal(sig, 1, 0)  # type: ignore[attr-defined]  # every event, exceptions too
        n = d.os.ioctl_count  # type: ignore[attr-defined]
        d.check_fault()  # answered by that wait
        assert d.os.ioctl_count == n  # type: ignore[attr-defined]
        d.check_fault()  # the next one asks the kernel
        assert d.os.ioctl_count == n + 1  # type: ignore[attr-defined]
    finally:
        d.close()


def test_an_amd_launch_block_from_a_remembered_shape_is_built_afresh() -> None:
    # The dispatch packet and hidden arguments are kept per shape: each block must still be what
    # building it from scratch gives, with its own address in the packet.
    from runtime.hcq.program import write_arg
    d, gpu = _amd()
    try:
        prg: Any = d.program((DATA / "amd_reference" / "vector_add.hsaco").read_bytes(),
                             "vector_add")
        a = d.alloc(64)
        args = (a, a, a)
        shapes = [((4, 1, 1), (256, 1, 1)), ((2, 3, 1), (8, 4, 2)), ((4, 1, 1), (256, 1, 1)),
                  ((1, 1, 5), (1, 1, 1)), ((2, 3, 1), (8, 4, 2))]
        blocks = set()
        for g, l in shapes:
            ka = prg.fill_kernargs(args, g, l)
            size = prg.kernargs_size()
            fresh = memoryview(bytearray(size))
            prg._fill_block_fields(ka.va, fresh, g, l)
            for slot, value in zip(prg.slots, args):
                write_arg(fresh[:max(prg.kernarg_B, 1)], slot, value, d)
            assert gpu.mem.read(ka.va, size) == bytes(fresh)
            blocks.add(ka.va)
        assert len(blocks) == len(shapes)  # each launch its own block (and address)
    finally:
        d.close()


# ------------------------------------------------------------------ the mock's memory look-ups
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["map", "unmap", "find"]), st.integers(0, 3),
                          st.integers(0, 3), st.integers(1, 3)), max_size=40))
def test_memory_look_ups_match_a_scan_of_the_mappings(ops: list[tuple[str, int, int, int]]
                                                      ) -> None:
    # find() remembers the mapping it found last: it must answer as a scan of the mappings
    # does, whatever was mapped or unmapped in between.
    from runtime.drivers.mock.memory import MockMemory, PageFault
    page = 0x1000
    mem, live = MockMemory(), {}  # va -> size
    for op, slot, off, n in ops:
        va = slot * page * 2
        if op == "map" and va not in live and all(va + n * page <= b or b + s <= va
                                                  for b, s in live.items()):
            mem.map(va, n * page)
            live[va] = n * page
        elif op == "unmap" and va in live:
            mem.unmap(va)
            del live[va]
        else:
            addr, size = va + off * page, n * page // 2
            want = [b for b, s in live.items() if b <= addr and addr + size <= b + s]
            try:
                data, at = mem.find(addr, size)
            except PageFault:
                assert not want
            else:
                assert want and at == addr - want[0] and len(data) == live[want[0]]


def test_an_amd_launch_from_kept_commands_sends_what_the_builder_builds() -> None:
    # The commands of a launch are kept per shape and patched, its block copied from the
    # shape's: what reaches the ring and the block must be what building them afresh gives,
    # for every shape, with and without the timestamps, whatever the arguments.
    from runtime.hcq.program import write_arg
    d, gpu = _amd()
    try:
        prg: Any = d.program((DATA / "amd_reference" / "vector_add.hsaco").read_bytes(),
                             "vector_add")
        bufs = [d.alloc(4096) for _ in range(3)]
        ring = d.compute_ring  # type: ignore[attr-defined]
        arena = d.kernarg_arena()
        blocks: list[int] = []
        take = arena.take

        def taking(size: int, align: int = 16) -> Any:
            va, view = take(size, align)
            blocks.append(va)
            return va, view

        arena.take = taking  # type: ignore[method-assign]
        shapes = [((4, 1, 1), (256, 1, 1)), ((2, 3, 1), (8, 4, 2)), ((4, 1, 1), (256, 1, 1))]
        for i, wait in enumerate((True, False, True, True)):
            for g, l in shapes:
                args = tuple(bufs[(i + j) % 3] for j in range(3))
                start = ring.wptr_dw
                v = d.timeline_value + 1
                prg(*args, global_size=g, local_size=l, wait=wait)
                sent = [int(ring.ring[i % ring.size_dw]) for i in range(start, ring.wptr_dw)]
                va = blocks[-1]  # the block this launch took
                q = d.compute_queue().wait(d.timeline_signal, v - 1).memory_barrier()
                if wait:
                    q.timestamp(prg._t0)
                q.exec(prg, va, g, l)
                if wait:
                    q.timestamp(prg._t1)
                q.signal(d.timeline_signal, v)
                assert sent == q.dwords()
                size = prg.kernargs_size()
                fresh = memoryview(bytearray(size))
                prg._fill_block_fields(va, fresh, g, l)
                for slot, value in zip(prg.slots, args):
                    write_arg(fresh[:max(prg.kernarg_B, 1)], slot, value, d)
                assert gpu.mem.read(va, size) == bytes(fresh)
        d.synchronize()
    finally:
        d.close()


def test_an_amd_launch_of_a_kept_shape_refuses_what_the_first_one_refuses() -> None:
    # A launch of a shape seen before takes the kept route: sizes of another type (1.0 for 1),
    # a wrong argument count or a bad argument are refused as for the first launch, and a
    # timeline value a 32-bit compare cannot hold is refused as the builder refuses it.
    from runtime.hcq.errors import ProgramError, QueueError
    d, _ = _amd()
    try:
        prg: Any = d.program((DATA / "amd_reference" / "vector_add.hsaco").read_bytes(),
                             "vector_add")
        a = d.alloc(4096)
        prg(a, a, a, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)
        with pytest.raises(ProgramError, match="global_size"):
            prg(a, a, a, global_size=(4.0, 1, 1), local_size=(256, 1, 1), wait=True)
        with pytest.raises(ProgramError, match="takes 3 arguments"):
            prg(a, a, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)
        with pytest.raises(ProgramError, match="pointer"):
            prg(a, a, 1.5, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)
        d.synchronize()
        v = d.timeline_value
        # (the timeline as far as a launch can take it: its wait compares 32 bits)
        d.timeline_signal.value = d.timeline_value = (1 << 32)
        with pytest.raises(QueueError, match="32-bit field"):
            prg(a, a, a, global_size=(4, 1, 1), local_size=(256, 1, 1), wait=True)
        assert d.timeline_value == 1 << 32
        d.timeline_signal.value = d.timeline_value = v
    finally:
        d.close()
