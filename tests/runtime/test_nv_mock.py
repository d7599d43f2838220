"""The NVIDIA driver end to end on the mock GPU: bring-up and teardown order, memory, copies through
staging, signals and cross-channel waits, launches (QMDs checked field by field by the mock, kernels
run as Python models), graphs with patched arguments, ring wrap-around, timeouts with channel state,
faults, RM/UVM failures decoded, and leaks. Kernel execution itself is verified on the H200
(test_nv_hw.py)."""
from __future__ import annotations

import ctypes
import errno
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.mock.nv_gpu import Launch
from runtime.drivers.mock.nv_rm import NvMockOS
from runtime.drivers.nv.device import NVDevice
from runtime.drivers.nv.generation import GENERATIONS, NVGeneration
from runtime.drivers.nv.rm import RmError
from runtime.hcq import DeviceFault, HCQMemoryError, MemKind, SignalTimeout
from runtime.hcq.errors import DeviceNotFound, ProgramError, QueueError

from .device_util import hold_timeline

DATA = Path(__file__).parent / "data"
CUBIN = (DATA / "nv_kernels_cuda13.cubin").read_bytes()


@pytest.fixture
def mos() -> NvMockOS:
    return NvMockOS.with_nv_gpus(1)


@pytest.fixture(params=["native", "python"])
def dev(mos: NvMockOS, request):  # type: ignore[no-untyped-def]
    """The mock device, with launches through the native helper and through the Python path."""
    d = NVDevice("mock-nv:0", os=mos)
    d.default_timeout_ms = 5000.0
    if request.param == "native":
        from runtime.drivers.nv.launcher import native_helper
        from runtime.hcq import native
        if native_helper() is None:
            pytest.skip(f"native launch helper unavailable: {native.unavailable}")
    d.launch_native = request.param == "native"
    yield d
    d.close()


def _gpu(d: NVDevice):  # type: ignore[no-untyped-def]
    return d.os.nv.gpus[0]  # type: ignore[attr-defined]


def _clean(mos: NvMockOS) -> None:
    live = mos.live_objects()
    assert all(v == 0 for v in live.values()), live
    assert not mos.nv.violations


def _vadd_model(launch: Launch) -> None:
    a, b, c = (launch.param(o, "Q") for o in (0, 8, 16))
    n = launch.param(24, "i")
    launch.array(c, np.float32, n)[:] = launch.array(a, np.float32, n) + \
        launch.array(b, np.float32, n)


def _inc_model(launch: Launch) -> None:
    x, n = launch.param(0, "Q"), launch.param(8, "i")
    launch.array(x, np.uint32, n)[:] += 1


# ------------------------------------------------------------------------------------ bring-up
def test_open_by_name_and_hopper_classes() -> None:
    from runtime.hcq import open_device
    d = open_device("mock-nv:0")
    try:
        assert isinstance(d, NVDevice) and d.arch == "sm_90" and d.sm == 90
        assert d.compute_class == rm.HOPPER_COMPUTE_A
        assert d.gpfifo_class == rm.HOPPER_CHANNEL_GPFIFO_A
        assert d.dma_class == rm.HOPPER_DMA_COPY_A and d.usermode_class == rm.HOPPER_USERMODE_A
        assert d.qmd_class.major == 4 and d.sass_version == 0x90
        assert d.driver_version == "580.159.04"
    finally:
        d.close()
    with pytest.raises(DeviceNotFound, match="only 1 NVIDIA GPU"):
        NVDevice("mock-nv:1", os=NvMockOS.with_nv_gpus(1))
    with pytest.raises(DeviceNotFound):
        NVDevice("gpu:0")


def test_ampere_gets_v03_qmds() -> None:
    mos = NvMockOS.with_nv_gpus(1, generation="ampere-b", sm_version=0x806)
    d = NVDevice("mock-nv:0", os=mos)
    try:
        assert d.qmd_class.major == 3 and d.gpfifo_class == rm.AMPERE_CHANNEL_GPFIFO_A
        assert d.arch == "sm_86" and d.default_param_base == 0x160
    finally:
        d.close()
    _clean(mos)


@pytest.mark.parametrize("gen", GENERATIONS, ids=lambda g: g.name)
def test_a_mock_of_each_generation_opens_with_its_records_classes(gen: NVGeneration) -> None:
    """The mock GPU offers what a generation record names; the driver picks that record and
    drives the GPU with its classes, QMD version and methods (copies and signals through the
    generation's copy and host methods, checked by the mock)."""
    from runtime.drivers.mock.nv_gpu import QMD_LAYOUT, MockNVGPU, QmdReader
    mos = NvMockOS.with_nv_gpus(1, generation=gen)
    assert set(gen.classes) <= set(mos.nv.classes)
    # the mock reads the record's QMD version where the driver's QMD class writes it
    q = gen.qmd()
    q.set_program(0x12_3456_7800)
    q.set_cbuf(0, 0x45_6700_0040, 0x220)
    lay = QMD_LAYOUT[gen.qmd.major]
    r = QmdReader(lay.prefix, bytes(q.data))
    assert MockNVGPU._program(r, lay) == 0x12_3456_7800
    assert MockNVGPU._cbuf(r, lay, 0) == (0x45_6700_0040, 0x220)
    d = NVDevice("mock-nv:0", os=mos)
    try:
        assert d.gen is gen
        assert (d.usermode_class, d.gpfifo_class, d.compute_class, d.dma_class) == gen.classes
        assert d.qmd_class is gen.qmd and d.default_param_base == gen.param_base
        assert d.arch == f"sm_{gen.sm[0]}"
        a, b = d.alloc(1 << 16), d.alloc(1 << 16)
        src = np.arange(1 << 14, dtype=np.uint32)
        d.copyin(a, src)
        d.transfer(b, a, 1 << 16)
        out = np.zeros_like(src)
        d.copyout(out, b)
        assert np.array_equal(out, src)
        assert _gpu(d).copied_B >= 3 << 16
    finally:
        d.close()
    _clean(mos)


def test_a_gpu_of_an_undescribed_generation_is_not_opened() -> None:
    turing = (rm.TURING_USERMODE_A, rm.TURING_CHANNEL_GPFIFO_A, rm.TURING_COMPUTE_A,
              rm.TURING_DMA_COPY_A, rm.KEPLER_CHANNEL_GROUP_A, rm.FERMI_CONTEXT_SHARE_A,
              rm.FERMI_VASPACE_A, rm.NV01_MEMORY_VIRTUAL)
    mos = NvMockOS.with_nv_gpus(1, classes=turing)
    with pytest.raises(DeviceNotFound, match="no description.*0xc5c0.*generation.py"):
        NVDevice("mock-nv:0", os=mos)
    _clean(mos)


def test_close_frees_every_rm_object_in_reverse_order(mos: NvMockOS) -> None:
    d = NVDevice("mock-nv:0", os=mos)
    bufs = [d.alloc(4096 * (i + 1), kind=k) for i, k in enumerate((MemKind.VRAM, MemKind.GTT))]
    d.free(bufs[0])
    d.program(CUBIN, "vadd")
    created = list(mos.nv.alloc_log)
    freed_before = len(mos.nv.free_log)
    d.close()
    closing = mos.nv.free_log[freed_before:]
    alive_at_close = [h for h in created if h not in mos.nv.free_log[:freed_before]]
    assert closing == alive_at_close[::-1]  # strict reverse creation order, the client last
    _clean(mos)
    d.close()  # idempotent


def test_bring_up_failure_undoes_everything(mos: NvMockOS) -> None:
    mos.inject_status("HOPPER_CHANNEL_GPFIFO_A", rm.NV_ERR_INSUFFICIENT_RESOURCES)
    with pytest.raises(HCQMemoryError, match="NV_ERR_INSUFFICIENT_RESOURCES"):
        NVDevice("mock-nv:0", os=mos)
    _clean(mos)


def test_rm_failures_name_the_call_and_decode_the_status(mos: NvMockOS) -> None:
    mos.inject_status("NV2080_CTRL_CMD_GPU_GET_GID_INFO", rm.NV_ERR_INVALID_ARGUMENT)
    with pytest.raises(RmError) as e:
        NVDevice("mock-nv:0", os=mos)
    msg = str(e.value)
    assert "NV2080_CTRL_CMD_GPU_GET_GID_INFO" in msg and "NV_ERR_INVALID_ARGUMENT" in msg
    assert "Invalid argument" in msg and e.value.status == rm.NV_ERR_INVALID_ARGUMENT
    mos.inject_status("UVM_REGISTER_GPU", rm.NV_ERR_GPU_UUID_NOT_FOUND)
    with pytest.raises(RmError, match="UVM_REGISTER_GPU.*NV_ERR_GPU_UUID_NOT_FOUND"):
        NVDevice("mock-nv:0", os=mos)
    mos.inject_ioctl_failure("NV_ESC_RM_MAP_MEMORY_DMA", errno.EFAULT)
    with pytest.raises(RmError, match="NV_ESC_RM_MAP_MEMORY_DMA.*EFAULT"):
        NVDevice("mock-nv:0", os=mos)
    _clean(mos)


def test_out_of_vram_is_a_memory_error(mos: NvMockOS) -> None:
    d = NVDevice("mock-nv:0", os=mos)
    try:
        with pytest.raises(HCQMemoryError, match="NV_ERR_NO_MEMORY"):
            d.alloc(200 << 30)
        d.alloc(1 << 20)  # still usable
    finally:
        d.close()
    _clean(mos)


# ------------------------------------------------------------------------------------ memory
@pytest.mark.parametrize("size", [1, 7, 4096, 4097, (8 << 20) + 3, (20 << 20) + 1])
def test_copyin_copyout_round_trip(dev: NVDevice, size: int) -> None:
    x = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
    buf = dev.alloc(size)
    dev.copyin(buf, x)
    out = np.zeros_like(x)
    dev.copyout(out, buf)
    assert np.array_equal(out, x)
    other = dev.alloc(size)
    dev.transfer(other, buf, size)
    out2 = np.zeros_like(x)
    dev.copyout(out2, other)
    assert np.array_equal(out2, x)


def test_host_memory_is_gpu_visible_and_vram_cpu_mapping(dev: NVDevice) -> None:
    host = dev.alloc(8192, kind=MemKind.HOST, cpu_access=True)
    host.cpu_view()[:5] = b"hello"
    vram = dev.alloc(8192, cpu_access=True)
    dev.copy_queue().copy(vram.va, host.va, 5).signal(dev.timeline_signal, dev.next_timeline()) \
        .submit()
    dev.synchronize()
    assert bytes(vram.cpu_view()[:5]) == b"hello"
    assert host.va < 1 << 40 and vram.va < 1 << 40 and host.va != vram.va


def test_signals_and_cross_queue_waits(dev: NVDevice) -> None:
    """Compute waits on copy: the copy channel fills B and signals; the compute channel waits for
    that signal before launching a kernel that reads B."""
    prg = dev.program(CUBIN, "vadd")
    _gpu(dev).register_kernel(prg.prog_va, _vadd_model)
    n = 1000
    src, a, b, c = (dev.alloc(n * 4) for _ in range(4))
    dev.copyin(src, np.arange(n, dtype=np.float32))
    dev.copyin(a, np.ones(n, np.float32))
    dev.synchronize()
    gate = dev.new_signal(0)
    done = dev.new_signal(0)
    # The compute queue is submitted first and must wait.
    ka = prg.fill_kernargs((a, b, c, n), (4, 1, 1), (256, 1, 1))
    dev.compute_queue().wait(gate, 5).memory_barrier().exec(prg, ka, (4, 1, 1), (256, 1, 1)) \
        .signal(done, 1).submit()
    dev.os.wait_idle()  # the GPU's thread has reached the acquire
    assert done.value == 0 and "semaphore acquire" in (dev.compute_channel.describe() + "".join(
        ch.describe() for ch in _gpu(dev).channels.values()))
    dev.copy_queue().copy(b.va, src.va, n * 4).signal(gate, 5).submit()
    done.wait(1, 2000)
    out = np.zeros(n, np.float32)
    dev.copyout(out, c)
    assert np.array_equal(out, np.arange(n, dtype=np.float32) + 1)
    assert gate.timestamp > 0 and done.timestamp >= gate.timestamp


def test_cpu_releases_a_gpu_wait(dev: NVDevice) -> None:
    sig = dev.new_signal(0)
    v = dev.next_timeline()
    dev.compute_queue().wait(sig, 3).signal(dev.timeline_signal, v).submit()
    threading.Timer(0.05, lambda: setattr(sig, "value", 3)).start()
    dev.synchronize(timeout_ms=3000)
    assert dev.timeline_signal.value == v


# ------------------------------------------------------------------------------------ launches
def test_vector_add_launch_and_qmd_fields(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "vadd")
    gpu = _gpu(dev)
    gpu.register_kernel(prg.prog_va, _vadd_model)
    n = 1000  # not a multiple of the block
    a, b, c = (dev.alloc(n * 4) for _ in range(3))
    av = np.arange(n, dtype=np.float32)
    dev.copyin(a, av)
    dev.copyin(b, av * 2)
    t = prg(a, b, c, n, global_size=((n + 255) // 256, 1, 1), local_size=(256, 1, 1), wait=True)
    assert t is not None and t >= 0
    out = np.zeros(n, np.float32)
    dev.copyout(out, c)
    assert np.array_equal(out, av * 3)
    q = gpu.launches[-1].qmd
    assert q["QMD_MAJOR_VERSION"] == 4 and q["QMD_TYPE"] == 2 and q["GRID_WIDTH"] == 4
    assert q["CTA_THREAD_DIMENSION0"] == 256 and q["SHARED_MEMORY_SIZE"] == 1024
    assert q["CONSTANT_BUFFER_VALID(4)"] == 1 and q["CONSTANT_BUFFER_VALID(3)"] == 1
    cb0 = gpu.launches[-1].cb0
    assert struct.unpack_from("<6I", cb0, 0) == (256, 1, 1, 4, 1, 1)
    assert struct.unpack_from("<QQ", cb0, 0x198) == (gpu.launches[-1].cb0_va + 0x210,
                                                       gpu.launches[-1].cb0_va + 0x210 + 28)


def test_a_launch_that_waits_takes_the_slot_ring_and_times_the_grid(dev: NVDevice) -> None:
    """wait=True goes through the shape's prebuilt slots (no timed template, no extra commands):
    its GPU time is the QMD release's timer minus the slot's progress release's timer, which the
    mock writes when the grid completes and when the front end passes SEND_PCAS."""
    prg = dev.program(CUBIN, "vadd")
    gpu = _gpu(dev)
    gpu.register_kernel(prg.prog_va, _vadd_model)
    n = 512
    a, b, c = (dev.alloc(n * 4) for _ in range(3))
    dev.copyin(a, np.ones(n, np.float32))
    dev.copyin(b, np.ones(n, np.float32))
    shape = ((2, 1, 1), (256, 1, 1))
    before = gpu.launch_count
    times = [prg(a, b, c, n, global_size=shape[0], local_size=shape[1], wait=True)
             for _ in range(3)]
    assert gpu.launch_count == before + 3 and prg._hot[shape] is not None
    assert prg._timed_commands is None, \
        "a waiting launch must not take the short path's timed template"
    tl, progress = dev.timeline_signal, dev.compute_channel.progress
    assert tl.value == dev.timeline_value and progress.value == dev.compute_channel.seq
    assert all(t is not None and 0 < t < 0.05 for t in times), times
    assert times[-1] == (tl.timestamp - progress.timestamp) / dev.clock_hz
    out = np.zeros(n, np.float32)
    dev.copyout(out, c)
    assert (out == 2).all()


def test_short_launch_path_emits_what_the_queue_builder_emits(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "inc")
    x = dev.alloc(4096)
    tl = dev.timeline_signal
    ka = prg.fill_kernargs((x, 16), (3, 1, 1), (16, 1, 1))
    generic = dev.compute_queue().wait(tl, 41).memory_barrier().exec(prg, ka, (3, 1, 1),
                                                                     (16, 1, 1)).signal(tl, 42)
    qmd_generic = bytes(ka.qmd)
    assert dev.qmd_class(bytearray(qmd_generic)).get("RELEASE_ENABLE", 0) == 1
    fast = prg.launch_words(ka, 42)
    assert fast.tolist() == generic.dwords()
    assert bytes(ka.qmd) == qmd_generic


def test_the_short_submission_path_reserves_as_every_path_does(dev: NVDevice) -> None:
    """`Channel.submit_one` takes its pushbuffer block through the channel's one reservation
    rule: a stream larger than half the pushbuffer is refused before anything is written (the
    error says to bind the queue), and a block that would wrap starts at the ring's beginning."""
    from array import array

    from runtime.drivers.nv.gpfifo import GP_PUT, PB_PUT, SEQ
    ch = dev.compute_channel
    dev.synchronize()
    before = (ch.state[PB_PUT], ch.state[GP_PUT], ch.state[SEQ])
    with pytest.raises(QueueError, match=r"bind\(\) the queue"):
        ch.submit_one(array("I", bytes(4 * (ch.pb_dw // 2 + 1))))
    assert (ch.state[PB_PUT], ch.state[GP_PUT], ch.state[SEQ]) == before
    # zero dwords (empty method headers) up to 4 dwords before the ring's end, so that the next
    # block cannot fit there
    nop, trailer = array("I", [0] * 8), len(ch._trailer)
    while (left := ch.pb_dw - ch.state[PB_PUT] % ch.pb_dw) >= len(nop) + trailer:
        ch.progress.wait(ch.submit_one(array("I", bytes(4 * min(ch.pb_dw // 4,
                                                               left - trailer - 4)))))
    start = ch.state[PB_PUT]
    assert start % ch.pb_dw == ch.pb_dw - 4
    ch.progress.wait(ch.submit_one(nop), 5000)   # (raw submissions are not on the timeline)
    assert ch.state[PB_PUT] == start + 4 + len(nop) + trailer   # began at the ring's start
    dev.copyin(dev.alloc(64), bytes(64))  # the channel still works
    dev.synchronize()


@pytest.mark.parametrize("name,args", [
    ("vadd", lambda b: (b, b, b, 1000)),
    ("many_params", lambda b: (b, -3, 300, 70000, -(1 << 40), 1.5, 2.25, 7, -8, 3.125, -0.5, 200,
                               1 << 50, -12, 99, 0.75, -1e300)),
    ("inc", lambda b: (b, 0xFFFFFFFF)),  # unsigned in a signed slot: the careful path
    ("affine", lambda b: (b, b, bytes(24))),
])
def test_fast_launch_block_equals_the_generic_block(dev: NVDevice, name: str, args) -> None:
    prg = dev.program(CUBIN, name)
    buf = dev.alloc(4096)
    a = args(buf)
    tl = dev.timeline_signal
    size = prg.kernargs_size()
    for va in (0x10_0000_0040, 0x10_0000_0100):
        b1, b2 = bytearray(size), bytearray(size)
        ka = prg.fill_kernargs(a, (3, 2, 1), (32, 2, 1), block=(va, memoryview(b1)))
        prg.write_release(ka.qmd, tl.va, 77)
        qmd_va = prg.fill_fast(va, memoryview(b2), a, (3, 2, 1), (32, 2, 1), 77)
        assert qmd_va == va + prg.qmd_offset(va)
        assert b1 == b2


def test_signal_after_launch_folds_into_the_qmd_release(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "inc")
    x = dev.alloc(4096)
    sig = dev.new_signal(0)
    ka = prg.fill_kernargs((x, 16), (1, 1, 1), (16, 1, 1))
    dev.compute_queue().exec(prg, ka, (1, 1, 1), (16, 1, 1)).signal(sig, 42).submit()
    sig.wait(42, 2000)
    q = _gpu(dev).launches[-1].qmd
    assert q["RELEASE_ENABLE(0)"] == 1 and q["RELEASE_SEMAPHORE0_PAYLOAD_LOWER"] == 42
    assert sig.timestamp > 0


def test_many_params_dynamic_smem_and_local_memory(dev: NVDevice) -> None:
    gpu = _gpu(dev)
    mp = dev.program(CUBIN, "many_params")
    seen: list[tuple] = []
    gpu.register_kernel(mp.prog_va, lambda L: seen.append(struct.unpack_from(
        "<Qbxhiqf4xdb3xidfB3xqih2xf4xd".replace(" ", ""), L.cb0, 0x210)))
    out = dev.alloc(16 * 8)
    args = (out, -3, -300, 70000, -(1 << 40), 1.5, 2.25, 7, -8, 3.125, -0.5, 200, 1 << 50, -12,
            99, 0.75, -1e300)
    mp(*args, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
    assert seen[0][1:] == args[1:]
    bs = dev.program(CUBIN, "block_sum", dynamic_smem_B=256 * 4)
    assert bs.shared_B == 0x400 + 1024
    bs(out, out, 1, global_size=(1, 1, 1), local_size=(256, 1, 1), wait=True)
    assert gpu.launches[-1].shared_B == 0x800
    la = dev.program(CUBIN, "local_array")
    assert dev.slm_per_thread >= 96 * 4
    la(out, out, 1, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
    assert gpu.launches[-1].qmd["SHADER_LOCAL_MEMORY_HIGH_SIZE"] == dev.slm_per_thread
    st = dev.program(CUBIN, "affine")
    st(out, out, struct.pack("<i4xdf4x", 3, 2.0, 1.0), global_size=(1, 1, 1),
       local_size=(32, 1, 1), wait=True)
    with pytest.raises(ProgramError, match="24 B"):
        st(out, out, b"short", global_size=(1, 1, 1), local_size=(32, 1, 1))


def test_relocated_device_globals_reach_the_kernel(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "lookup")
    seen = {}

    def model(L: Launch) -> None:
        q = L.qmd
        cb4 = (q["CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(4)"] << 32 if
               "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(4)" in q else 0) | \
            q["CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(4)"]
        table_va = struct.unpack("<Q", L.gpu.mem.read(cb4 << 6, 8))[0]
        seen["table"] = list(L.array(table_va, np.int32, 8))

    _gpu(dev).register_kernel(prg.prog_va, model)
    buf = dev.alloc(64)
    prg(buf, buf, 1, global_size=(1, 1, 1), local_size=(32, 1, 1), wait=True)
    assert seen["table"] == [3, 1, 4, 1, 5, 9, 2, 6]


def test_bad_launch_shapes_are_refused_before_the_gpu(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "vadd")
    a = dev.alloc(64)
    with pytest.raises(ProgramError, match="exceeds"):
        prg(a, a, a, 1, global_size=(1, 1, 1), local_size=(2048, 1, 1))
    with pytest.raises(ProgramError, match="takes 4 arguments"):
        prg(a, a, global_size=(1, 1, 1), local_size=(1, 1, 1))
    with pytest.raises(ProgramError, match="no kernel"):
        dev.program(CUBIN, "nope")
    with pytest.raises(QueueError, match="KernArgs"):
        dev.compute_queue().exec(prg, 0x1000, (1, 1, 1), (1, 1, 1))


@pytest.mark.parametrize("native_launch", [True, False])
def test_rings_wrap_around_without_leaks(native_launch: bool) -> None:
    mos = NvMockOS.with_nv_gpus(1)
    d = NVDevice("mock-nv:0", os=mos, pushbuf_B=8192, gpfifo_entries=16)
    d.launch_native = native_launch
    prg = d.program(CUBIN, "inc")
    _gpu(d).register_kernel(prg.prog_va, _inc_model)
    x = d.alloc(64 * 4)
    d.copyin(x, np.zeros(64, np.uint32))
    prg(x, 64, global_size=(1, 1, 1), local_size=(64, 1, 1))  # allocates the argument arena
    live = mos.live_objects()
    for _ in range(599):
        prg(x, 64, global_size=(1, 1, 1), local_size=(64, 1, 1))
    d.synchronize()
    out = np.zeros(64, np.uint32)
    d.copyout(out, x)
    assert np.all(out == 600)
    assert mos.live_objects() == live
    assert d.compute_channel.seq > 600 and d.compute_channel.gp_put > 16 * 10
    d.close()
    _clean(mos)


# ------------------------------------------------------------------------------------ failures
def test_timeout_reports_channel_state_then_recovers(dev: NVDevice) -> None:
    never = dev.new_signal(0)
    v = dev.next_timeline()
    dev.compute_queue().wait(never, 1).signal(dev.timeline_signal, v).submit()
    t0 = time.perf_counter()
    with pytest.raises(SignalTimeout) as e:
        dev.synchronize(timeout_ms=200)
    assert time.perf_counter() - t0 < 2.0
    msg = str(e.value)
    assert "compute channel" in msg and "SEM_EXECUTE" in msg and "ACQ_CIRC_GEQ" in msg
    assert f"timeline completed {v - 1} of {v}" in msg
    never.value = 1
    dev.synchronize(timeout_ms=2000)


def test_gpu_fault_raises_device_fault_with_xid(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "write_null")
    _gpu(dev).register_kernel(prg.prog_va, lambda L: L.gpu.mem.write_u32(0x40, 1))
    x = dev.alloc(64)
    with pytest.raises(DeviceFault, match="Xid 31") as e:
        prg(x, global_size=(1, 1, 1), local_size=(1, 1, 1), wait=True, timeout_ms=3000)
    assert "page fault" in str(e.value) and "NVRM: Xid" in str(e.value)
    with pytest.raises(DeviceFault):  # every later call raises a fresh one
        dev.alloc(64)


def test_a_bad_qmd_is_caught_by_the_mock(dev: NVDevice) -> None:
    prg = dev.program(CUBIN, "vadd")
    a = dev.alloc(64)
    ka = prg.fill_kernargs((a, a, a, 1), (1, 1, 1), (32, 1, 1))
    ka.qmd[0x98:0x9C] = b"\0\0\0\0"  # program address low dword (what a V03 layout leaves there)
    ka.qmd[0x9C:0xA0] = b"\0\0\0\0"
    v = dev.next_timeline()
    dev.compute_queue().exec(prg, ka, (1, 1, 1), (32, 1, 1)).signal(dev.timeline_signal, v).submit()
    with pytest.raises(DeviceFault, match="(?s)Xid 13.*program address"):
        dev.synchronize(timeout_ms=2000)


@pytest.mark.parametrize("release", [False, True])
def test_the_mock_allows_a_gpu_scope_barrier_only_on_a_grid_that_starts_a_successor(
        dev: NVDevice, release: bool) -> None:
    """A grid that completes with a GPU-scope barrier (L1_MEMBAR) must start a successor on this
    GPU and release no semaphore: the host may read what a grid wrote as soon as it sees the
    grid's completion, and only the system-scope barrier makes the writes visible to it."""
    prg = dev.program(CUBIN, "vadd")
    a = dev.alloc(64)
    ka = prg.fill_kernargs((a, a, a, 1), (1, 1, 1), (32, 1, 1))
    q = dev.qmd_class(bytearray(ka.qmd))
    q.write(CWD_MEMBAR_TYPE=q.value("CWD_MEMBAR_TYPE_L1_MEMBAR"))
    if release:  # starts a successor (itself), but also releases a semaphore
        q.set_dependent(0, ka.va + prg.qmd_offset(ka.va))
        q.set_release(0, dev.new_signal().va, 1)
    ka.qmd[:] = q.data
    v = dev.next_timeline()
    dev.compute_queue().exec(prg, ka, (1, 1, 1), (32, 1, 1)).signal(dev.timeline_signal, v).submit()
    with pytest.raises(DeviceFault, match="(?s)Xid 13.*system-scope barrier"):
        dev.synchronize(timeout_ms=2000)


def test_unknown_method_faults_the_channel(dev: NVDevice) -> None:
    from runtime.drivers.nv.methods import nvm
    from runtime.hcq.queue import extend_from
    q = dev.compute_queue()
    extend_from(q, nvm(1, 0x1234 & ~3, 0))
    v = dev.next_timeline()
    q.signal(dev.timeline_signal, v).submit()
    with pytest.raises(DeviceFault, match="not modelled"):
        dev.synchronize(timeout_ms=2000)


def test_uvm_and_rm_refuse_bad_requests_directly(mos: NvMockOS) -> None:
    d = NVDevice("mock-nv:0", os=mos)
    try:
        with pytest.raises(RmError, match="UVM_CREATE_EXTERNAL_RANGE.*NV_ERR_INVALID_ADDRESS"):
            d.uvm.create_external_range(0x1001, 4096)
        buf = d.alloc(4096)
        with pytest.raises(RmError, match="UVM_ADDRESS_IN_USE"):
            d.uvm.create_external_range(buf.va, 4096)
        with pytest.raises(RmError, match="NV_ESC_RM_ALLOC.*NV_ERR_INVALID_OBJECT_PARENT"):
            d.rm.alloc(d.subdevice, rm.FERMI_VASPACE_A, rm.NV_VASPACE_ALLOCATION_PARAMETERS())
        with pytest.raises(RmError, match="NV_ERR_INVALID_OBJECT_HANDLE"):
            d.rm.free(0x1234)
        p = rm.NV2080_CTRL_GPU_GET_GID_INFO_PARAMS(flags=0)
        with pytest.raises(RmError, match="NV2080_CTRL_CMD_GPU_GET_GID_INFO"):
            d.rm.control(d.subdevice, rm.NV2080_CTRL_CMD_GPU_GET_GID_INFO, p)
        assert ctypes.sizeof(p) == 268
    finally:
        d.close()
    _clean(mos)


def test_hot_launch_fills_prebuilt_slots(dev: NVDevice) -> None:
    """The hot path (prg(...) without wait) writes, into a slot of the shape's launcher, the
    launch block `fill_fast` writes, and points a GPFIFO entry at the slot's command segment: the
    acquire of the previous timeline value after other work, WAIT_FOR_IDLE alone after a launch
    of its own channel."""
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.gpfifo import SEM_ACQUIRE_GEQ_64, SEM_RELEASE_TS, host_semaphore
    from runtime.drivers.nv.methods import SUBC_COMPUTE, decode_gp_entry, nvm
    prg = dev.program(CUBIN, "vadd")
    _gpu(dev).register_kernel(prg.prog_va, _vadd_model)
    n = 300
    a, b, c = (dev.alloc(n * 4) for _ in range(3))
    dev.copyin(a, np.arange(n, dtype=np.float32))
    dev.copyin(b, np.full(n, 2, np.float32))
    ch, tl = dev.compute_channel, dev.timeline_signal
    v0 = dev.timeline_value + 1  # the copies took the values before: the first launch acquires
    for _ in range(3):
        prg(a, b, c, n, global_size=(2, 1, 1), local_size=(256, 1, 1))
    hot = prg._hot[(2, 1, 1), (256, 1, 1)]
    assert hot is not None and hot.n >= 4
    assert (type(hot.fn).__name__ == "builtin_function_or_method") == dev.launch_native
    assert dev.timeline_value == v0 + 2 and dev.compute_channel.chain_value == v0 + 2
    dev.synchronize()
    out = np.zeros(n, np.float32)
    dev.copyout(out, c)
    assert np.array_equal(out, np.arange(n, dtype=np.float32) + 2)
    mask = ch.entries - 1
    seqs = [ch.seq - 2, ch.seq - 1, ch.seq]
    gp = [ch.gp_put - 3, ch.gp_put - 2, ch.gp_put - 1]
    words = hot.buf.cpu_view().cast("I")
    size = hot.qo + prg.qmd_class.size_B
    for i in range(3):
        v = v0 + i
        bva, sva = hot.block_va(i), hot.segment_va(i)
        qmd_va = bva + hot.qo
        seg = (host_semaphore(tl.va, v - 1, SEM_ACQUIRE_GEQ_64)
               + nvm(SUBC_COMPUTE, cl.NVCBC0_WAIT_FOR_IDLE, 0)
               + nvm(SUBC_COMPUTE, cl.NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI,
                     dev.gen.compute.cache_invalidate)
               + nvm(SUBC_COMPUTE, cl.NVCBC0_SEND_PCAS_A, qmd_va >> 8)
               + nvm(SUBC_COMPUTE, cl.NVCBC0_SEND_SIGNALING_PCAS2_B,
                     dev.gen.compute.pcas_action(dev.pcas_action))
               + host_semaphore(ch.progress.va, seqs[i], SEM_RELEASE_TS))
        va, nd = decode_gp_entry(ch.ring[gp[i] & mask])
        skip = 0 if i == 0 else 6  # later launches start at WAIT_FOR_IDLE
        assert (va, nd) == (sva + 4 * skip, len(seg) - skip)
        w0 = (sva - hot.buf.va) // 4
        got = words[w0:w0 + len(seg)].tolist()
        assert got[skip:] == seg[skip:]
        ref = bytearray(prg.kernargs_size())
        assert prg.fill_fast(bva, memoryview(ref), (a, b, c, n), (2, 1, 1), (256, 1, 1),
                             v) == qmd_va
        off = bva - hot.buf.va
        assert bytes(hot.buf.cpu_view()[off:off + size]) == bytes(ref[:size])
    # a copy in between breaks the chain: the next launch acquires again
    dev.copyin(a, np.arange(n, dtype=np.float32))
    prg(a, b, c, n, global_size=(2, 1, 1), local_size=(256, 1, 1))
    va, nd = decode_gp_entry(ch.ring[(ch.gp_put - 1) & mask])
    assert va == hot.segment_va(3)
    dev.synchronize()
    # other argument types take another specialization, or the careful path
    prg(a, b, c, n, global_size=(2, 1, 1), local_size=(256, 1, 1))
    ip = dev.program(CUBIN, "inc")
    ip(a, 0xFFFFFFFF, global_size=(1, 1, 1), local_size=(32, 1, 1))  # unsigned in a signed slot
    dev.synchronize()


def test_launch_slots_are_returned_on_free_and_eviction(dev: NVDevice) -> None:
    """Each launch shape holds a chunk of slot memory: freeing the program, or passing 64 shapes,
    gives the chunks back (after the slots' launches complete) instead of growing without end."""
    from runtime.drivers.nv.launcher import BACKING_B, CHUNK_B
    prg = dev.program(CUBIN, "inc")
    _gpu(dev).register_kernel(prg.prog_va, _inc_model)
    x = dev.alloc(256 * 4)
    dev.copyin(x, np.zeros(256, np.uint32))
    for blocks in range(1, 81):
        prg(x, 256, global_size=(blocks, 1, 1), local_size=(1, 1, 1))
    assert len(prg._hot) <= 64
    pools = dev.launch_chunks.pools
    in_use = sum(BACKING_B // CHUNK_B - p.free_count for p in pools)
    assert in_use == len(prg._hot) < 80
    dev.synchronize()
    out = np.zeros(256, np.uint32)
    dev.copyout(out, x)
    assert np.all(out == 80)  # the model adds 1 everywhere per launch
    prg.free()
    assert not prg._hot and all(p.free_count == BACKING_B // CHUNK_B for p in pools)


def test_copy_template_submits_what_the_copy_queue_builds(dev: NVDevice) -> None:
    """Staged and device copies go through a prebuilt copy template: the same words as the copy
    queue's wait/copy/signal, with the addresses, length and timeline values patched in."""
    from runtime.drivers.nv.methods import decode_gp_entry
    a, b = dev.alloc(1 << 20), dev.alloc(1 << 20)
    dev.copyin(a, np.arange(1 << 18, dtype=np.uint32))
    dev.transfer(b, a, (1 << 20) - 4096, dst_offset=4096 - 12, src_offset=12)
    v = dev.timeline_value
    ch = dev.copy_channel
    va, nd = decode_gp_entry(ch.ring[(ch.gp_put - 1) & (ch.entries - 1)])
    off = (va - ch.pushbuf.va) // 4
    got = ch.pb[off:off + nd].tolist()
    tl = dev.timeline_signal
    want = dev.copy_queue().wait(tl, v - 1).copy(b.va + 4096 - 12, a.va + 12, (1 << 20) - 4096) \
        .signal(tl, v).dwords()
    assert got[:len(want)] == want
    out = np.zeros(1 << 18, np.uint32)
    dev.copyout(out, b)
    assert np.array_equal(out[1021:1021 + 1000], np.arange(3, 1003, dtype=np.uint32))


def test_every_acquire_switches_the_channel_group_off_while_unmet(dev: NVDevice) -> None:
    """Every host semaphore acquire the runtime writes carries ACQUIRE_SWITCH_TSG: a channel
    waiting for a signal must not hold the engine for its group's whole timeslice (on the H200
    another process's launches then took about 1 ms each). Scanned: the pushbuffers of the
    compute, copy and stream channels and a graph's bound body, after launches chained after
    copies, a stream's event waited on, a GraphWait and a replay held back by the timeline."""
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.gpfifo import _SEM_HEADER
    from runtime.drivers.nv.methods import fget
    from runtime.hcq import GraphWait
    from runtime.hcq import Launch as GraphLaunch
    inc = dev.program(CUBIN, "inc")
    _gpu(dev).register_kernel(inc.prog_va, _inc_model)
    x = dev.alloc(256)
    dev.copyin(x, np.zeros(64, np.uint32))
    gs, ls = (1, 1, 1), (64, 1, 1)
    for _ in range(3):
        inc(x, 64, global_size=gs, local_size=ls)
        dev.copyin(x, np.zeros(64, np.uint32))  # the copy waits for the launch, and the
    s = dev.stream()                             # next launch for the copy
    s.launch(inc, x, 64, global_size=gs, local_size=ls)
    dev.wait(s.record())
    gate = dev.new_signal(1)
    g = dev.graph([GraphWait(gate, 1), GraphLaunch(inc, (x, 64), gs, ls)])
    g.replay(wait=True)
    held = dev.new_signal(0)
    hold_timeline(dev, held)  # the replay keeps its opening wait
    g.replay()
    held.value = 1
    dev.synchronize()
    out = np.zeros(64, np.uint32)
    dev.copyout(out, x)
    assert (out == 3).all()

    acquires = {cl.NVC56F_SEM_EXECUTE_OPERATION_ACQUIRE, cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ,
                cl.NVC56F_SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ}
    streams = [ch.pb.tolist() for ch in dev._stream_channels]
    bodies = [seg.dwords() for seg in g._segments if not isinstance(seg, list)]
    found = 0
    for words in [dev.compute_channel.pb.tolist(), dev.copy_channel.pb.tolist(), *streams,
                  *bodies]:
        for i, w in enumerate(words[:-5]):
            execute = words[i + 5]
            if w == _SEM_HEADER and fget(cl.NVC56F_SEM_EXECUTE_OPERATION, execute) in acquires:
                found += 1
                assert fget(cl.NVC56F_SEM_EXECUTE_ACQUIRE_SWITCH_TSG, execute), hex(execute)
    assert found >= 8  # copies after launches, launches after copies, the event, the gates
