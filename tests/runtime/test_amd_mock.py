"""The AMD driver end to end on the mock GPU: memory, copies, signals and waits across engines,
timeouts, patched resubmission, indirect buffers, teardown, injected ioctl failures, leaks, and the
packets the mock refuses."""
from __future__ import annotations

import errno
import importlib.util
import threading
import time
from pathlib import Path

import numpy as np
import traceback

import pytest

_HAVE = importlib.util.find_spec("hcq_bindings.amd") is not None and all(
    importlib.util.find_spec(f"hcq_bindings.amd.{m}") is not None
    for m in ("pm4_gfx11", "sdma_v6", "gc_11_0_0", "hsa"))
pytestmark = pytest.mark.skipif(not _HAVE, reason="generated AMD bindings are not committed yet "
                                                   "(bindgen regen amd)")

REFERENCE_KERNELS = Path(__file__).resolve().parent / "data" / "amd_reference"


def _executor_available() -> bool:
    try:
        from runtime.drivers.mock.rdna3 import DispatchRecord, KernelFault, execute  # noqa: F401
        return True
    except ImportError:
        return False


@pytest.fixture
def mos():  # type: ignore[no-untyped-def]
    from runtime.drivers.mock.os import MockOS
    return MockOS.with_amd_gpus(1)


@pytest.fixture
def dev(mos):  # type: ignore[no-untyped-def]
    from runtime.drivers.amd.device import AMDDevice
    d = AMDDevice("mock-amd:0", os=mos)
    d.default_timeout_ms = 5000.0
    yield d
    d.close()


def _zero_objects(mos) -> None:  # type: ignore[no-untyped-def]
    live = mos.live_objects()
    assert all(v == 0 for v in live.values()), live


# ------------------------------------------------------------------------------------ memory
def test_open_device_picks_the_mock_and_names_parse() -> None:
    from runtime.hcq import AMDDevice, DeviceNotFound, open_device
    d = open_device("mock-amd:0")
    assert isinstance(d, AMDDevice) and d.arch == "gfx1100" and d.name == "mock-amd:0"
    d.close()
    with pytest.raises(DeviceNotFound):
        open_device("tpu:0")
    with pytest.raises(DeviceNotFound, match="only 1 AMD GPU"):
        AMDDevice("amd:1", os=_one_gpu())


def test_a_driver_missing_from_the_tree_is_a_clear_device_not_found(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Driver classes load lazily through the core's registry; one whose module is absent is a
    DeviceNotFound, not an ImportError."""
    import dataclasses

    import runtime.hcq as hcq
    from runtime.hcq import registry
    monkeypatch.delitem(vars(hcq), "NVDevice", raising=False)  # not cached from an earlier access
    absent = dataclasses.replace(registry.backend("nv"),
                                 device="runtime.drivers.nv_absent.device:NVDevice",
                                 probe="runtime.drivers.nv_absent.probe:count_gpus")
    monkeypatch.setattr(registry, "BACKENDS", (absent, registry.backend("amd")))
    with pytest.raises(hcq.DeviceNotFound, match="nv driver.*not installed"):
        hcq.NVDevice  # noqa: B018
    assert registry.present_devices(_one_gpu()) == ["amd:0"]  # the absent driver has no GPUs


def test_presence_probes_are_the_drivers_and_the_mocks_come_from_the_registry() -> None:
    """Each driver's probe counts its GPUs on a seam (here the mock machines'); the real drivers
    never import a mock (the registry makes mock machines for "mock-…" names)."""
    from pathlib import Path

    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import registry
    assert registry.present_devices(MockOS.with_amd_gpus(2)) == ["amd:0", "amd:1"]
    assert registry.present_devices(NvMockOS.with_nv_gpus(1)) == ["nv:0"]
    for vendor, kind in (("nv", NvMockOS), ("amd", MockOS)):
        seam, release = registry.mock_seam(vendor)
        assert type(seam) is kind
        release()
    drivers = Path(registry.__file__).parents[1] / "drivers"
    for vendor in ("amd", "nv"):
        for py in (drivers / vendor).glob("*.py"):
            text = py.read_text()
            assert "import runtime.drivers.mock" not in text and \
                "from runtime.drivers.mock" not in text, f"{py} imports the mock"


def _one_gpu():  # type: ignore[no-untyped-def]
    from runtime.drivers.mock.os import MockOS
    return MockOS.with_amd_gpus(1)


def test_alloc_kinds_and_cpu_views(dev, mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import MemKind
    gpu = mos.drivers[0].gpus[0]
    vram = dev.alloc(10_000)
    gtt = dev.alloc(100, kind=MemKind.GTT, cpu_access=True, uncached=True)
    host = dev.alloc(5000, kind=MemKind.HOST)
    pub = dev.alloc(4096, cpu_access=True)
    assert vram.view is None and len(gtt.cpu_view()) == 100 and len(host.cpu_view()) == 5000
    gtt.cpu_view()[:5] = b"hello"
    host.cpu_view()[-3:] = b"xyz"
    assert gpu.mem.read(gtt.va, 5) == b"hello"               # GPU VA == CPU VA, same bytes
    assert gpu.mem.read(host.va + 4997, 3) == b"xyz"
    pub.cpu_view()[0] = 7
    assert gpu.mem.read(pub.va, 1) == b"\x07"
    doorbells = dev.map_doorbells()
    assert gpu.mem.find(doorbells.va, 0x2000)
    for b in (vram, gtt, host, pub, doorbells):
        dev.free(b)
    with pytest.raises(Exception, match="double free"):
        dev.free(vram)


def test_vram_exhaustion_is_a_memory_error(mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq import HCQMemoryError
    from runtime.drivers.mock.os import MockOS
    small = MockOS.with_amd_gpus(1, vram_B=512 << 20)
    d = AMDDevice("mock-amd:0", os=small)
    with pytest.raises(HCQMemoryError, match="AMDKFD_IOC_ALLOC_MEMORY_OF_GPU.*ENOMEM"):
        d.alloc(1 << 30)
    d.alloc(1 << 20)  # still usable
    d.close()
    _zero_objects(small)


@pytest.mark.parametrize("size,offset", [(1, 0), (3, 1), (4095, 7), (4096, 0), (4097, 4093),
                                         (65537, 3), (0x400000, 0), (0x400001, 1),
                                         (9 * (1 << 20) + 7, 5)])
def test_copyin_copyout_roundtrip(dev, size: int, offset: int) -> None:  # type: ignore
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    buf = dev.alloc(size + offset + 3)
    dev.copyin(buf, data, dst_offset=offset)
    out = np.zeros(size, np.uint8)
    dev.copyout(out, buf, src_offset=offset)
    assert np.array_equal(out, data)
    dev.free(buf)


def test_copies_beyond_the_packet_limit_split(dev, mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.drivers.amd.sdma import MAX_COPY_B
    n = 2 * MAX_COPY_B + 12345
    data = np.random.default_rng(1).integers(0, 256, n, dtype=np.uint8)
    a, b = dev.alloc(n), dev.alloc(n + 1)
    dev.copyin(a, data)
    dev.transfer(b, a, n, dst_offset=1)
    out = np.zeros(n, np.uint8)
    dev.copyout(out, b, src_offset=1)
    assert np.array_equal(out, data)


def test_mock_refuses_an_oversized_copy_packet(mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq import DeviceFault
    d = AMDDevice("mock-amd:0", os=mos, max_copy_B=8 << 20)  # a driver that ignores the limit
    a, b = d.alloc(8 << 20), d.alloc(8 << 20)
    d.transfer(b, a, 8 << 20)
    with pytest.raises(DeviceFault, match="COPY_LINEAR of 8388608 B exceeds"):
        d.synchronize()
    d.close()
    _zero_objects(mos)


# ------------------------------------------------------------------------------------ signals
def test_signals_and_waits_across_engines(dev) -> None:  # type: ignore[no-untyped-def]
    a, b, c = dev.new_signal(), dev.new_signal(), dev.new_signal()
    # compute waits for copy, copy waits for compute: a ping-pong across the two engines.
    dev.compute_queue().wait(a, 1).signal(b, 2).submit()
    assert b.value == 0
    dev.copy_queue().signal(a, 1).wait(b, 2).signal(c, (7 << 32) | 3).timestamp(c).submit()
    c.wait((7 << 32) | 3, timeout_ms=1000)
    assert b.value == 2 and c.timestamp > 0


def test_queue_waits_on_a_signal_the_cpu_sets_later(dev) -> None:  # type: ignore[no-untyped-def]
    gate, done = dev.new_signal(), dev.new_signal()
    dev.compute_queue().wait(gate, 5).signal(done, 1).submit()
    time.sleep(0.01)
    assert done.value == 0
    gate.value = 5            # a plain CPU store; the GPU notices on its own
    done.wait(1, timeout_ms=1000)


def test_cpu_thread_releases_a_waiting_cpu(dev) -> None:  # type: ignore[no-untyped-def]
    gate, done = dev.new_signal(), dev.new_signal()
    dev.copy_queue().wait(gate, 1).signal(done, 9).submit()
    t = threading.Timer(0.05, lambda: setattr(gate, "value", 1))
    t.start()
    done.wait(9, timeout_ms=2000)
    t.join()


def test_read_pointer_names_the_waiting_packet_then_catches_up(dev) -> None:  # type: ignore
    # The mock publishes the read pointer once per run of its fetch loop: it must still point at
    # a packet that blocks (the runtime reads it after a timeout) and reach the write pointer.
    gate, done = dev.new_signal(), dev.new_signal()
    dev.compute_queue().signal(done, 1).wait(gate, 2).signal(done, 3).submit()
    done.wait(1, timeout_ms=1000)
    ring = dev.compute_ring
    assert ring.pending_dw() > 0
    at = ring.ring[ring.rptr_dw()]
    assert dev.gfx.pm4.CP_PACKET3_GET_OPCODE(at) == dev.gfx.pm4.PACKET3_WAIT_REG_MEM
    gate.value = 2
    done.wait(3, timeout_ms=1000)
    assert ring.pending_dw() == 0


def test_timeout_raises_with_device_state(dev) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import SignalTimeout
    gate, done = dev.new_signal(), dev.new_signal()
    dev.compute_queue().wait(gate, 3).signal(done, 1).submit()
    t0 = time.perf_counter()
    with pytest.raises(SignalTimeout) as ei:
        done.wait(1, timeout_ms=100)
    assert 0.09 < time.perf_counter() - t0 < 2
    e = ei.value
    assert (e.want, e.got) == (1, 0)
    assert "pm4 queue" in e.state and "PACKET3_WAIT_REG_MEM" in e.state
    assert f"addr={gate.va:#x}" in e.state and "reference=0x3" in e.state
    gate.value = 3  # the device is still healthy
    done.wait(1, timeout_ms=1000)


def test_patched_queue_is_resubmitted_without_rebuilding(dev) -> None:  # type: ignore
    from runtime.hcq import Var
    s, t = dev.new_signal(), dev.new_signal()
    v = Var("v")
    q = dev.compute_queue().wait(t, v).signal(s, v + 100)
    n = len(q)
    for i in range(1, 6):
        t.value = i
        q.submit({v: i})
        s.wait(i + 100, timeout_ms=1000)
    assert len(q) == n  # nothing was appended
    cq = dev.copy_queue().signal(s, v)
    for i in (1000, 1 << 40):
        cq.submit({v: i})
        s.wait(i, timeout_ms=1000)


def test_bound_queue_runs_from_an_indirect_buffer(dev, mos) -> None:  # type: ignore
    from runtime.hcq import QueueError, Var
    s = dev.new_signal()
    v = Var("v")
    body = dev.compute_queue().signal(s, v).timestamp(s).bind()
    for i in (3, 4, 5):
        body.update({v: i})
        dev.compute_queue().call(body).submit()
        s.wait(i, timeout_ms=1000)
    body.submit({v: 6})  # a bound queue submits itself as one INDIRECT_BUFFER packet
    s.wait(6, timeout_ms=1000)
    body.signal(s, 7)
    with pytest.raises(QueueError, match="after bind"):
        body.submit()
    body.bind().submit()
    s.wait(7, timeout_ms=1000)
    body.unbind()


def test_ring_wraps_many_times(mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.drivers.amd.device import AMDDevice
    dev = AMDDevice("mock-amd:0", os=mos, ring_B=4096, sdma_ring_B=4096)
    s = dev.new_signal()
    for i in range(1, 300):  # 1024-dword rings; 16 (compute) and 14 (copy) dwords per submission
        dev.compute_queue().signal(s, i).submit()
        dev.copy_queue().signal(s, i).submit()
    s.wait(299, timeout_ms=1000)
    assert dev.compute_ring.wptr_dw > 4 * dev.compute_ring.size_dw
    assert dev.copy_ring.wptr_dw > 4 * dev.copy_ring.size_dw
    dev.close()


# ------------------------------------------------------------------------------------ teardown
def test_close_releases_every_kernel_object(mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq import DeviceClosed, MemKind
    d = AMDDevice("mock-amd:0", os=mos)
    before = mos.live_objects()
    assert before["kfd_queues"] == 2 and before["kfd_events"] == 3 and before["fds"] == 2
    for kind in (MemKind.VRAM, MemKind.GTT, MemKind.HOST):
        d.alloc(12345, kind=kind, cpu_access=kind is not MemKind.VRAM)
    d.copyin(d.alloc(100), b"x" * 100)
    d.new_signal()
    d.close()
    _zero_objects(mos)
    with pytest.raises(DeviceClosed):
        d.alloc(10)
    d.close()  # idempotent


def test_thousand_alloc_free_cycles_leak_nothing(dev, mos) -> None:  # type: ignore
    from runtime.hcq import MemKind
    gpu = mos.drivers[0].gpus[0]
    base, vram = mos.live_objects(), gpu.vram_used
    kinds = (MemKind.VRAM, MemKind.GTT, MemKind.HOST)
    before = dev.pool_stats()
    for i in range(1000):
        b = dev.alloc(4096 * (1 + i % 7), kind=kinds[i % 3], cpu_access=i % 3 != 0)
        dev.free(b)
    # Freed memory is cached for reuse: 21 (size, kind) pairs, the rest served from the pool.
    st = dev.pool_stats()
    assert st.misses - before.misses == 21 and st.hits - before.hits == 979 and st.cached_B > 0
    dev.trim_pool()
    assert dev.pool_stats().cached_B == 0
    assert mos.live_objects() == base and gpu.vram_used == vram
    # every BO is the allocator's but the process's event page (runtime/drivers/amd/process.py)
    assert dev.allocator.live_count + 1 == base["kfd_bos"]


# ------------------------------------------------------------------------------------ failures
def test_injected_ioctl_failure_names_the_ioctl(dev, mos) -> None:  # type: ignore
    from runtime.hcq import IoctlError
    base = mos.live_objects()
    mos.inject_ioctl_failure("AMDKFD_IOC_MAP_MEMORY_TO_GPU", errno.EFAULT)
    with pytest.raises(IoctlError) as ei:
        dev.alloc(4096)
    assert ei.value.name == "AMDKFD_IOC_MAP_MEMORY_TO_GPU" and ei.value.errno == errno.EFAULT
    assert "AMDKFD_IOC_MAP_MEMORY_TO_GPU" in str(ei.value) and "EFAULT" in str(ei.value)
    assert mos.live_objects() == base  # the half-made allocation was undone
    dev.alloc(4096)  # and the device still works


@pytest.mark.parametrize("ioctl", ["AMDKFD_IOC_ACQUIRE_VM", "AMDKFD_IOC_CREATE_EVENT",
                                   "AMDKFD_IOC_CREATE_QUEUE", "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"])
def test_failure_during_bring_up_releases_what_was_made(mos, ioctl: str) -> None:  # type: ignore
    from runtime.drivers.amd.device import AMDDevice
    from runtime.hcq import HCQError
    mos.inject_ioctl_failure(ioctl, errno.ENOMEM, skip=1 if ioctl != "AMDKFD_IOC_ACQUIRE_VM" else 0)
    with pytest.raises(HCQError, match=ioctl):
        AMDDevice("mock-amd:0", os=mos)
    _zero_objects(mos)


def test_open_failure_is_device_not_found() -> None:
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import DeviceNotFound
    empty = MockOS()
    with pytest.raises(DeviceNotFound, match="KFD topology"):
        AMDDevice("amd:0", os=empty)


def _raw_submit(dev, dwords) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq.queue import extend_from
    q = dev.compute_queue()
    extend_from(q, dwords)
    q.submit()
    # Outside the timeline nothing waits for it: let the asynchronous mock GPU run it first.
    dev.os.wait_idle()


def test_unknown_opcode_is_refused_pointing_at_the_packet(dev) -> None:  # type: ignore
    from runtime.drivers.amd.packets import packet3
    from runtime.hcq import DeviceFault
    _raw_submit(dev, [packet3(dev.gfx.pm4, 0xEE, 1), 0])
    with pytest.raises(DeviceFault) as ei:
        dev.synchronize()
    msg = str(ei.value)
    assert "unknown opcode 0xee" in msg and "compute queue 1 at ring dword 0" in msg
    assert "hardware exception" in msg
    # Every later call raises a fresh error of the same report, caused by the first: re-raising
    # one object would grow its traceback with every call.
    first = ei.value
    tb_lens = []
    for _ in range(50):
        with pytest.raises(DeviceFault) as again:
            dev.alloc(16)
        assert again.value is not first and again.value.__cause__ is first
        assert str(again.value) == str(first)
        tb_lens.append(len(traceback.format_exception(again.value)))
    assert tb_lens[0] == tb_lens[-1]


def test_misaligned_signal_address_is_refused(dev) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import DeviceFault
    s = dev.new_signal()
    va = s.va + 4
    k = dev.pm4_encoding
    _raw_submit(dev, [k.h_release_mem, k.rm_eop, k.rm_data64, va & 0xFFFFFFFF, va >> 32,
                      1, 0, 0])
    with pytest.raises(DeviceFault, match="RELEASE_MEM 64-bit address .* not 8-byte aligned"):
        dev.synchronize()


def test_a_known_release_mem_form_checks_each_address(dev) -> None:  # type: ignore[no-untyped-def]
    # What RELEASE_MEM's selector dwords mean is kept per pair of dwords: the address, the data
    # and the alignment are still those of each packet.
    from runtime.hcq import DeviceFault
    s, t = dev.new_signal(), dev.new_signal()
    k = dev.pm4_encoding
    for sig, value in ((s, 5), (t, 7 | 3 << 32), (s, 6)):
        va = sig.va
        _raw_submit(dev, [k.h_release_mem, k.rm_eop, k.rm_data64, va & 0xFFFFFFFF, va >> 32,
                          value & 0xFFFFFFFF, value >> 32, 0])
    dev.synchronize()
    assert (s.value, t.value) == (6, 7 | 3 << 32)
    va = s.va + 4
    _raw_submit(dev, [k.h_release_mem, k.rm_eop, k.rm_data64, va & 0xFFFFFFFF, va >> 32,
                      1, 0, 0])
    with pytest.raises(DeviceFault, match="RELEASE_MEM 64-bit address .* not 8-byte aligned"):
        dev.synchronize()


def test_set_sh_reg_past_its_range_is_refused(dev) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import DeviceFault
    k = dev.pm4_encoding
    p = dev.gfx.pm4
    last = p.PACKET3_SET_SH_REG_END - p.PACKET3_SET_SH_REG_START
    _raw_submit(dev, [k.h_set_sh_reg_6, 0, 1, 2, 3, 4, 5, 6])
    _raw_submit(dev, [k.h_set_sh_reg_6, last - 6, 1, 2, 3, 4, 5, 6])  # ends at the range's end
    dev.synchronize()
    _raw_submit(dev, [k.h_set_sh_reg_6, last - 5, 1, 2, 3, 4, 5, 6])
    with pytest.raises(DeviceFault, match="SET_SH_REG index .* leaves the SH register range"):
        dev.synchronize()


def test_unmapped_address_is_a_memory_fault(dev) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import DeviceFault
    a = dev.alloc(4096)
    dev.copy_queue().copy(0xDEAD0000, a.va, 64).submit()
    dev.os.wait_idle()
    with pytest.raises(DeviceFault) as ei:
        dev.synchronize()
    msg = str(ei.value)
    assert "memory fault at VA 0xdead0000" in msg and "COPY_LINEAR" in msg


def test_a_wait_that_can_never_complete_is_refused(dev) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import DeviceFault
    s = dev.new_signal()
    k = dev.pm4_encoding
    # (value & 0xff) >= 0x100 can never hold.
    _raw_submit(dev, [k.h_wait_reg_mem, k.wait_ge_mem, s.va & 0xFFFFFFFF, s.va >> 32, 0x100,
                      0xFF, 4])
    with pytest.raises(DeviceFault, match="can never complete"):
        dev.synchronize()


def test_write_data_and_event_write_execute(dev) -> None:  # type: ignore[no-untyped-def]
    from hcq_bindings.amd import pm4_gfx11 as p

    from runtime.drivers.amd.packets import packet3
    from runtime.drivers.amd.pm4 import WRITE_DATA_DST_MEMORY
    s = dev.new_signal()
    ctl = p.WRITE_DATA_DST_SEL(WRITE_DATA_DST_MEMORY) | p.WR_CONFIRM
    _raw_submit(dev, [packet3(p, p.PACKET3_WRITE_DATA, 5), ctl, s.va & 0xFFFFFFFF, s.va >> 32, 7,
                      1, packet3(p, p.PACKET3_EVENT_WRITE, 1), p.EVENT_TYPE(0x7) | p.EVENT_INDEX(4)])
    dev.synchronize()
    assert s.value == (1 << 32) | 7


def test_register_wait_and_nested_ib_are_refused(dev) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import DeviceFault
    s = dev.new_signal()
    inner = dev.compute_queue().signal(s, 1).bind()
    outer = dev.compute_queue().call(inner).bind()
    dev.compute_queue().call(outer).submit()
    dev.os.wait_idle()
    with pytest.raises(DeviceFault, match="INDIRECT_BUFFER inside an indirect buffer"):
        dev.synchronize()


# ------------------------------------------------------------------------------------ programs
def test_program_load_and_dispatch_record(dev, mos) -> None:  # type: ignore[no-untyped-def]
    from runtime.hcq import DeviceFault, ProgramError
    lib = (REFERENCE_KERNELS / "vector_add.hsaco").read_bytes()
    with pytest.raises(ProgramError, match="no kernel 'nope'"):
        dev.program(lib, "nope")
    prg = dev.program(lib, "vector_add")
    assert [s.kind for s in prg.slots] == ["buffer"] * 3 and prg.pgm_va % 256 == 0
    n = 1024
    x = np.arange(n, dtype=np.float32)
    a, b, c = (dev.alloc(n * 4) for _ in range(3))
    dev.copyin(a, x)
    dev.copyin(b, 2 * x)
    if not _executor_available():
        with pytest.raises(DeviceFault, match="no kernel executor"):
            prg(a, b, c, global_size=(n // 256, 1, 1), local_size=(256, 1, 1), wait=True)
        return
    t = prg(a, b, c, global_size=(n // 256, 1, 1), local_size=(256, 1, 1), wait=True)
    out = np.zeros(n, np.float32)
    dev.copyout(out, c)
    assert np.array_equal(out, 3 * x) and t is not None and t > 0
    rec = mos.drivers[0].gpus[0].dispatches[-1].record
    assert rec.pgm_addr == prg.pgm_va and rec.grid == (4, 1, 1) and rec.block == (256, 1, 1)
    assert rec.rsrc2 == prg.rsrc2 and len(rec.user_sgprs) == prg.user_sgpr_count


def test_the_architecture_record_is_picked_from_the_topology() -> None:
    """The device takes its architecture record from the node's gfx_target_version, and the mock
    runs by the same record; a part no record describes (gfx90a, gfx1200) is refused by name
    before anything is sent to it."""
    from runtime.drivers.amd.arch import GFX11
    from runtime.drivers.mock.os import MockOS
    from runtime.hcq import AMDDevice, DeviceNotFound
    mos = MockOS.with_amd_gpus(1)
    d = AMDDevice("amd:0", os=mos)
    try:
        assert d.gfx is GFX11 and d.arch == "gfx1100" and mos.drivers[0].gpus[0].arch is GFX11
        assert d.pm4_encoding.arch is GFX11 and d.sdma_encoding.arch is GFX11
    finally:
        d.close()
    for version, part in ((90010, "gfx90a"), (120000, "gfx1200")):
        other = MockOS.with_amd_gpus(1, gfx_target_version=version)
        with pytest.raises(DeviceNotFound, match=f"{part}.*no description.*arch.py"):
            AMDDevice("amd:0", os=other)
        assert other.live_objects()["fds"] == 0  # nothing left open


def test_packets_the_descriptions_do_not_cover_stop_the_queue_naming_them() -> None:
    """The mock executes packets through their descriptions: an SDMA op none describes and a
    described PM4 packet of the wrong size are errors naming the packet (never a silent no-op)."""
    from runtime.drivers.amd.arch import GFX11
    from runtime.drivers.amd.packets import packets_for
    from runtime.hcq import AMDDevice, DeviceFault
    PM4, SDMA, s = packets_for(GFX11).pm4, packets_for(GFX11).sdma, GFX11.sdma
    from runtime.hcq.queue import extend_from
    for engine, dwords, want in (
            ("copy", [s.SDMA_PKT_ATOMIC_HEADER_OP(s.SDMA_OP_ATOMIC), 0, 0, 0, 0, 0, 0, 0],
             "unsupported SDMA op SDMA_OP_ATOMIC"),
            ("compute", [PM4["DISPATCH_DIRECT"].header_for(4) - (1 << 16), 1, 1, 1],
             "PACKET3_DISPATCH_DIRECT has 3 payload dwords, expected 4")):
        d = AMDDevice("amd:0", os=_one_gpu())
        try:
            q = d.copy_queue() if engine == "copy" else d.compute_queue()
            extend_from(q, dwords)
            q.submit()
            d.os.wait_idle()
            with pytest.raises(DeviceFault, match=want):
                d.synchronize(timeout_ms=2000)
        finally:
            d.close()
    assert SDMA["NOP"].size_of(SDMA["NOP"].encode(count=3)[0]) == 4
