"""Several GPUs in one process, on the mocks: devices opened together on one mock machine,
buffers that know their device, peer mappings through KFD and RM/UVM, cross-device waits, host waits
on many signals, and `transfer` on each of its paths, byte for byte. The same tests on two real
NVIDIA GPUs are in test_multi_gpu_hw.py."""
from __future__ import annotations

import errno
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import (Device, HCQError, HCQMemoryError, IoctlError, MemKind, SignalTimeout,
                         TransferPath, open_device, open_devices, transfer, wait_all)
from runtime.hcq import group

REFERENCE_KERNELS = Path(__file__).resolve().parent / "data" / "amd_reference"
VENDORS = ("amd", "nv")


def _machine(vendor: str, p2p: bool = True) -> Any:
    if vendor == "amd":
        from runtime.drivers.mock.os import MockOS
        return MockOS.with_amd_gpus(2, p2p=p2p)
    from runtime.drivers.mock.nv_rm import NvMockOS
    return NvMockOS.with_nv_gpus(2, p2p=p2p)


def _open_pair(vendor: str, mos: Any) -> tuple[Device, Device]:
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.nv.device import NVDevice
    cls = AMDDevice if vendor == "amd" else NVDevice
    d0 = cls(f"mock-{vendor}:0", os=mos)
    try:
        return d0, cls(f"mock-{vendor}:1", os=mos)
    except BaseException:
        d0.close()
        raise


@pytest.fixture(params=VENDORS)
def pair(request: Any) -> Iterator[tuple[Device, Device]]:
    """Two GPUs of one mock machine, every pair peer-capable."""
    d0, d1 = open_devices(f"mock-{request.param}:0", f"mock-{request.param}:1")
    yield d0, d1
    d1.close()
    d0.close()
    live = d0.os.live_objects()
    assert all(v == 0 for k, v in live.items()), live  # both closed: nothing left in the kernel


@pytest.fixture(params=VENDORS)
def no_p2p(request: Any) -> Iterator[tuple[Device, Device]]:
    """Two GPUs of one mock machine whose topology has no peer path between them."""
    d0, d1 = _open_pair(request.param, _machine(request.param, p2p=False))
    yield d0, d1
    d0.close()
    d1.close()


def _data(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + n).integers(0, 256, n, dtype=np.uint8)


def _read(dev: Device, buf: Any, n: int, offset: int = 0) -> np.ndarray:
    out = np.zeros(n, np.uint8)
    dev.copyout(out, buf, offset)
    return out


# ------------------------------------------------------------------ groups and ownership
def test_mock_devices_opened_by_name_share_one_machine(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    assert d0.os is d1.os and d0.os.kernel is d1.os.kernel
    assert d0.peer_access(d1) is None and d1.peer_access(d0) is None
    b0, b1 = d0.alloc(64), d1.alloc(64)
    assert b0.device is d0 and b1.device is d1 and d0.name in repr(b0)


def test_machine_is_fresh_after_the_last_close() -> None:
    d = open_device("mock-nv:1")
    mos = d.os
    d.close()
    d = open_device("mock-nv:0")
    try:
        assert d.os is not mos
    finally:
        d.close()


def test_foreign_buffers_are_refused_naming_both_devices(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    b0, b1 = d0.alloc(64), d1.alloc(64)
    with pytest.raises(HCQMemoryError, match=rf"dst .* belongs to {d1.name}, not {d0.name}"):
        d0.copyin(b1, bytes(64))
    with pytest.raises(HCQMemoryError, match=rf"src .* belongs to {d0.name}, not {d1.name}"):
        d1.copyout(bytearray(64), b0)
    with pytest.raises(HCQMemoryError, match=rf"src .* belongs to {d0.name}, not {d1.name}"):
        d1.transfer(b1, b0, 64)
    with pytest.raises(HCQMemoryError, match="belongs to"):
        d0.free(b1)
    # the device stays usable, and the buffers too
    d0.copyin(b0, bytes(range(64)))
    assert bytes(_read(d0, b0, 64)) == bytes(range(64))


# ------------------------------------------------------------------ peer mappings
def test_peer_mapping_shows_the_same_bytes(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    b0 = d0.alloc(1 << 16)
    data = _data(1 << 16)
    d0.copyin(b0, data)
    d0.synchronize()  # two devices are ordered only by waits: d1 reads next
    m = d1.map_peer(b0)
    assert m.device is d1 and m.peer_of is b0 and d1.map_peer(b0) is m  # made once
    assert np.array_equal(_read(d1, m, 1 << 16), data)        # d1's copy engine reads d0's VRAM
    d1.copyin(m, data[::-1].copy())                            # and writes it
    d1.synchronize()
    assert np.array_equal(_read(d0, b0, 1 << 16), data[::-1])
    part = d1.map_peer(b0.slice(4096, 100))
    assert part.base is m and np.array_equal(_read(d1, part, 100), data[::-1][4096:4196])
    with pytest.raises(HCQMemoryError, match="is itself a peer mapping"):
        d0.map_peer(m)
    with pytest.raises(HCQError, match="is a peer mapping"):
        d1.free(m)


def test_freeing_the_owner_unmaps_its_peers(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    d1.unmap_peer(d1.map_peer(d0.alloc(8192)))  # NVIDIA: the peer link stays until close
    d0.allocator.trim()
    before = d0.os.live_objects()
    b0 = d0.alloc(8192)
    m = d1.map_peer(b0)
    d0.free(b0)
    assert m.freed and not b0.mappings
    with pytest.raises(HCQError, match="freed"):
        d1.copyin(m, bytes(16))
    d0.allocator.trim()  # the caching allocator kept b0's memory; the peer mapping is gone anyway
    assert d0.os.live_objects() == before


def test_unmap_peer_then_map_again(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    b0 = d0.alloc(4096)
    m = d1.map_peer(b0)
    d1.unmap_peer(m)
    with pytest.raises(HCQError, match="not a peer mapping"):
        d1.unmap_peer(m)
    m2 = d1.map_peer(b0)
    assert m2 is not m and not m2.freed
    d0.copyin(b0, b"\x5a" * 4096)
    d0.synchronize()
    assert set(_read(d1, m2, 4096)) == {0x5A}


def test_peer_vram_refused_without_a_peer_path(no_p2p: tuple[Device, Device]) -> None:
    d0, d1 = no_p2p
    reason = d1.peer_access(d0)
    assert reason is not None and d0.name in reason and d1.name in reason
    b0 = d0.alloc(4096)
    with pytest.raises(HCQMemoryError, match=rf"{d1.name} cannot map .*{d0.name}"):
        d1.map_peer(b0)
    # host memory needs no peer path: every GPU of the machine reaches it
    h0 = d0.alloc(4096, kind=MemKind.GTT, cpu_access=True)
    h0.cpu_view()[:4] = b"abcd"
    assert bytes(_read(d1, d1.map_peer(h0), 4)) == b"abcd"


def test_kfd_refuses_peer_vram_without_a_link() -> None:
    d0, d1 = _open_pair("amd", _machine("amd", p2p=False))
    try:
        b0 = d0.alloc(4096)
        with pytest.raises(IoctlError, match="AMDKFD_IOC_MAP_MEMORY_TO_GPU") as e:
            d1.kfd.map_memory(b0.handle.handle, [d1.node.gpu_id])  # type: ignore[attr-defined]
        assert e.value.errno == errno.EINVAL
        assert any("without a P2P link" in line for line in d0.os.log)
    finally:
        d1.close()
        d0.close()


def test_kfd_event_page_is_one_per_process() -> None:
    from hcq_bindings.linux import kfd_ioctl as kfd
    d0, d1 = open_devices("mock-amd:0", "mock-amd:1")
    try:
        _check_event_page(d0, d1, kfd)
    finally:
        d1.close()
        d0.close()


def _check_event_page(d0: Any, d1: Any, kfd: Any) -> None:
    page = d0._event_page  # type: ignore[attr-defined]
    assert page is d1._event_page and page.gpus == {d0.node.gpu_id, d1.node.gpu_id}  # type: ignore
    with pytest.raises(IoctlError) as e:   # kfd_ioctl_create_event: "Event page is already set"
        d1.kfd.create_event(kfd.KFD_IOC_EVENT_SIGNAL, 1, page.buf.handle.handle)  # type: ignore
    assert e.value.errno == errno.EINVAL
    # the second device's completions wake its waits through the shared page (no timeout)
    b = d1.alloc(4096)
    d1.copyin(b, bytes(4096))
    d1.synchronize(timeout_ms=2000)


# ------------------------------------------------------------------ cross-device ordering
def test_queue_waits_for_a_signal_another_device_writes(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    s0 = d0.new_signal(0)
    seen = d1.map_signal(s0)
    b1 = d1.alloc(4096)
    # d1: wait for d0's signal, then copy; d0: release the signal from its own queue later
    src = d1.alloc(4096, kind=MemKind.GTT, cpu_access=True)
    src.cpu_view()[:] = b"\x77" * 4096
    v = d1.next_timeline()
    d1.copy_queue().wait(d1.timeline_signal, v - 1).wait(seen, 7) \
        .copy(b1.va, src.va, 4096).signal(d1.timeline_signal, v).submit()
    with pytest.raises(SignalTimeout):
        d1.timeline_signal.wait(v, timeout_ms=30)
    w = d0.next_timeline()
    d0.copy_queue().wait(d0.timeline_signal, w - 1).signal(s0, 7) \
        .signal(d0.timeline_signal, w).submit()
    wait_all([(d0.timeline_signal, w), (d1.timeline_signal, v)], timeout_ms=2000)
    assert s0.value == 7 and set(_read(d1, b1, 4096)) == {0x77}


def test_signal_chain_across_devices(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    s0, s1 = d0.new_signal(0), d1.new_signal(0)
    s1_on_0, s0_on_1 = d0.map_signal(s1), d1.map_signal(s0)
    for i in range(1, 6):   # ping-pong: d0 signals 2i-1, d1 waits for it and signals 2i, ...
        d0.copy_queue().wait(s1_on_0, 2 * i - 2).signal(s0, 2 * i - 1).submit()
        d1.copy_queue().wait(s0_on_1, 2 * i - 1).signal(s1, 2 * i).submit()
    wait_all([(s0, 9), (s1, 10)], timeout_ms=2000)
    assert (s0.value, s1.value) == (9, 10)


def test_wait_all_times_out_naming_the_late_signal(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    a, b, done = d0.new_signal(0), d1.new_signal(0), d1.new_signal(5)
    with pytest.raises(SignalTimeout) as e:
        wait_all([(done, 5), (a, 2), (b, 1)], timeout_ms=20)
    assert e.value.signal is a and e.value.want == 2
    assert d0.name in e.value.state and d1.name in e.value.state


# ------------------------------------------------------------------ transfers
@pytest.mark.parametrize("size", [1, 4095, 4096, 3 * 4096 + 5])
def test_transfer_paths_byte_for_byte(pair: tuple[Device, Device], size: int,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    d0, d1 = pair
    monkeypatch.setattr(group, "BOUNCE_CHUNK_B", 4096)  # several chunks, both stages in turn
    data = _data(size)
    a = d0.alloc(size + 8)
    b = d1.alloc(size + 16)
    d0.copyin(a, data, 8)
    for path in (TransferPath.PEER, TransferPath.HOST_BOUNCE, TransferPath.CPU_BOUNCE):
        d1.copyin(b, np.zeros(size + 16, np.uint8))
        r = transfer(b, a, size, dst_offset=16, src_offset=8, path=path)
        assert r.path is path and r.size_B == size
        if path is not TransferPath.PEER:
            assert r.chunks == -(-size // 4096)
        got = _read(d1, b, size + 16)
        assert np.array_equal(got[16:], data) and not got[:16].any(), path
    assert transfer(b, a, size, 16, 8).path is TransferPath.PEER  # the default with peers
    back = d0.alloc(size)
    assert transfer(back, b, size, src_offset=16).path is TransferPath.PEER
    assert np.array_equal(_read(d0, back, size), data)


def test_transfer_bounces_without_peer_access(no_p2p: tuple[Device, Device]) -> None:
    d0, d1 = no_p2p
    n = 3 * group.BOUNCE_CHUNK_B // 2 + 3
    data = _data(n)
    a, b = d0.alloc(n), d1.alloc(n)
    d0.copyin(a, data)
    r = transfer(b, a, n)
    assert r.path is TransferPath.HOST_BOUNCE and r.chunks == 2
    assert np.array_equal(_read(d1, b, n), data)
    with pytest.raises(HCQMemoryError, match=f"no direct path from {d0.name} to {d1.name}"):
        transfer(b, a, n, path=TransferPath.PEER)
    assert not a.mappings and not b.mappings  # the bounce maps only its own staging chunks


def test_transfer_between_machines_goes_through_the_cpu() -> None:
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.mock.os import MockOS
    from runtime.drivers.nv.device import NVDevice
    amd = AMDDevice("mock-amd:0", os=MockOS.with_amd_gpus(1))
    nv = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    try:
        data = _data(5000)
        a, b = amd.alloc(5000), nv.alloc(5000)
        amd.copyin(a, data)
        assert amd.peer_access(nv) is not None
        r = transfer(b, a, 5000)
        assert r.path is TransferPath.CPU_BOUNCE
        assert np.array_equal(_read(nv, b, 5000), data)
        with pytest.raises(HCQMemoryError, match="not GPUs of one kernel"):
            transfer(b, a, 10, path=TransferPath.HOST_BOUNCE)
    finally:
        nv.close()
        amd.close()


def test_peer_transfer_is_ordered_on_both_timelines(pair: tuple[Device, Device]) -> None:
    d0, d1 = pair
    n = 1 << 16
    a, b = d0.alloc(n), d1.alloc(n)
    for i in range(4):   # write, move, overwrite: each step sees the previous one's bytes
        d0.copyin(a, np.full(n, i, np.uint8))
        transfer(b, a, n)
        d0.copyin(a, np.full(n, 0xEE, np.uint8))  # d0's later copy waits for the transfer
        assert set(_read(d1, b, n)) == {i}
    assert set(_read(d0, a, n)) == {0xEE}


def test_kernel_on_one_gpu_reads_the_other_gpus_vram() -> None:
    """The AMD mock runs kernels: vector_add on GPU 1 with `a` in GPU 0's VRAM (a peer mapping)."""
    d0, d1 = open_devices("mock-amd:0", "mock-amd:1")
    try:
        x = np.arange(256, dtype=np.float32)
        a0 = d0.alloc(x.nbytes)
        d0.copyin(a0, x)
        b1, c1 = d1.alloc(x.nbytes), d1.alloc(x.nbytes)
        d1.copyin(b1, 10 * x)
        prg = d1.program((REFERENCE_KERNELS / "vector_add.hsaco").read_bytes(), "vector_add")
        prg(d1.map_peer(a0), b1, c1, global_size=(2, 1, 1), local_size=(128, 1, 1), wait=True)
        out = np.zeros_like(x)
        d1.copyout(out, c1)
        assert np.array_equal(out, 11 * x)
    finally:
        d1.close()
        d0.close()


# ------------------------------------------------------------------ the NVIDIA mock refuses what RM/UVM do
@pytest.fixture
def nv_pair() -> Iterator[tuple[Any, Any]]:
    d0, d1 = open_devices("mock-nv:0", "mock-nv:1")
    yield d0, d1
    d1.close()
    d0.close()
    assert not d0.os.nv.violations


def _nv_status(e: Any) -> str:
    return str(getattr(e, "status_name", ""))


def test_nv_peer_mapping_is_made_of_the_documented_calls(nv_pair: tuple[Any, Any]) -> None:
    from hcq_bindings.nv import rm_580 as rm
    d0, d1 = nv_pair
    b0 = d0.alloc(1 << 20)
    before = len(d0.os.nv.alloc_log)
    d1.map_peer(b0)
    made = [d0.os.nv.objects[h].hclass for h in d0.os.nv.alloc_log[before:]]
    assert made == [rm.NV01_DEVICE_0, rm.NV20_SUBDEVICE_0, rm.NV50_P2P, rm.NV1_MEMORY_USER]
    vas = next(v for v in d0.os.nv.va_spaces if d1.uuid in v.vaspaces)
    assert vas.gpus == {d0.uuid, d1.uuid} and vas.peers == {frozenset((d0.uuid, d1.uuid))}
    d1.map_peer(d0.alloc(4096))   # the link is made once per pair
    assert [d0.os.nv.objects[h].hclass for h in d0.os.nv.alloc_log[before + 4:]] == \
        [rm.NV1_MEMORY_USER, rm.NV1_MEMORY_USER]  # the new buffer and its dup


def test_nv_rm_refuses_peer_memory_without_dup_or_p2p_object(nv_pair: tuple[Any, Any]) -> None:
    from hcq_bindings.nv import rm_580 as rm
    from runtime.drivers.nv.methods import fval
    from runtime.drivers.nv.rm import RmError
    d0, d1 = nv_pair
    b0 = d0.alloc(4096)
    flags = fval(rm.NVOS46_FLAGS_DMA_OFFSET_FIXED, rm.NVOS46_FLAGS_DMA_OFFSET_FIXED_TRUE) \
        | fval(rm.NVOS46_FLAGS_P2P_ENABLE, rm.NVOS46_FLAGS_P2P_ENABLE_NOSLI)
    va = d1.va_heap.alloc(4096, 4096)
    with pytest.raises(RmError) as e:     # another client's handle, not dup'd into this one
        d1.rm.map_memory_dma(d1.nvdevice, d1.virtmem, b0.handle.handle, 4096, va, flags)
    assert _nv_status(e.value) == "NV_ERR_INVALID_OBJECT_HANDLE"
    remote = d1.rm.alloc(d1.rm.root, rm.NV01_DEVICE_0, rm.NV0080_ALLOC_PARAMETERS(
        deviceId=d0.device_instance, hClientShare=d1.rm.root))
    dup = d1.rm.dup_object(remote, d0.rm.root, b0.handle.handle)
    with pytest.raises(RmError) as e:     # dup'd, but no NV50_P2P: no peer id for the PTEs
        d1.rm.map_memory_dma(d1.nvdevice, d1.virtmem, dup, 4096, va, flags)
    assert _nv_status(e.value) == "NV_ERR_INVALID_STATE"
    sub = d1.rm.alloc(remote, rm.NV20_SUBDEVICE_0, rm.NV2080_ALLOC_PARAMETERS())
    with pytest.raises(RmError) as e:     # NV50_P2P needs the client's own subdevices
        d1.rm.alloc(d1.rm.root, rm.NV50_P2P, rm.NV503B_ALLOC_PARAMETERS(
            hSubDevice=d1.subdevice, hPeerSubDevice=d0.subdevice))
    assert _nv_status(e.value) == "NV_ERR_INVALID_ARGUMENT"
    p2p = d1.rm.alloc(d1.rm.root, rm.NV50_P2P, rm.NV503B_ALLOC_PARAMETERS(
        hSubDevice=d1.subdevice, hPeerSubDevice=sub))
    d1.rm.map_memory_dma(d1.nvdevice, d1.virtmem, dup, 4096, va, flags)
    d1.uvm.create_external_range(va, 4096)
    with pytest.raises(RmError) as e:     # UVM: the owning GPU is not registered here
        d1.uvm.map_external_allocation(va, 4096, d1.rm.root, dup, d1.uuid)
    assert _nv_status(e.value) == "NV_ERR_INVALID_DEVICE"
    d1.uvm.register_gpu(d0.uuid)
    with pytest.raises(RmError) as e:     # UVM: registered, but peer access not enabled
        d1.uvm.map_external_allocation(va, 4096, d1.rm.root, dup, d1.uuid)
    assert _nv_status(e.value) == "NV_ERR_INVALID_DEVICE"
    d1.uvm.enable_peer_access(d1.uuid, d0.uuid)
    with pytest.raises(RmError) as e:
        d1.uvm.enable_peer_access(d0.uuid, d1.uuid)
    assert _nv_status(e.value) == "NV_ERR_INVALID_DEVICE"
    d1.uvm.map_external_allocation(va, 4096, d1.rm.root, dup, d1.uuid)
    d0.copyin(b0, b"\x42" * 4096)
    d0.synchronize()  # copyin returns once its source may be reused, not when the copy is done
    assert d0.os.nv.gpus[1].mem.read(va, 4) == b"\x42" * 4   # GPU 1's page tables see GPU 0's page
    d1.uvm.free(va, 4096)
    d1.va_heap.release(va, 4096)
    d1.uvm.disable_peer_access(d1.uuid, d0.uuid)
    d1.uvm.unregister_gpu(d0.uuid)
    for h in (p2p, dup, sub, remote):
        d1.rm.free(h)


def test_nv_refusals_without_p2p() -> None:
    from hcq_bindings.nv import rm_580 as rm
    from runtime.drivers.nv.rm import RmError
    d0, d1 = _open_pair("nv", _machine("nv", p2p=False))
    try:
        reason = d1.peer_access(d0)
        assert reason is not None and "reads the GPU does not support it" in reason
        d1.uvm.register_gpu(d0.uuid)
        with pytest.raises(RmError) as e:
            d1.uvm.enable_peer_access(d1.uuid, d0.uuid)
        assert _nv_status(e.value) == "NV_ERR_NOT_SUPPORTED"
        d1.uvm.unregister_gpu(d0.uuid)
        remote = d1.rm.alloc(d1.rm.root, rm.NV01_DEVICE_0, rm.NV0080_ALLOC_PARAMETERS(
            deviceId=d0.device_instance, hClientShare=d1.rm.root))
        sub = d1.rm.alloc(remote, rm.NV20_SUBDEVICE_0, rm.NV2080_ALLOC_PARAMETERS())
        with pytest.raises(RmError) as e:
            d1.rm.alloc(d1.rm.root, rm.NV50_P2P, rm.NV503B_ALLOC_PARAMETERS(
                hSubDevice=d1.subdevice, hPeerSubDevice=sub))
        assert _nv_status(e.value) == "NV_ERR_NOT_SUPPORTED"
        d1.rm.free(sub)
        d1.rm.free(remote)
    finally:
        d1.close()
        d0.close()
    assert not d0.os.nv.violations and d0.os.live_objects()["nv_rm_objects"] == 0


def test_one_mock_gpu_is_opened_once_per_process() -> None:
    d = open_device("mock-nv:0")
    try:
        # Refused before the driver is asked (UVM would refuse a second VA space less clearly).
        with pytest.raises(HCQError, match=r"mock-nv:0: this GPU is already open in this process "
                                           r"as NVDevice\('mock-nv:0'"):
            open_device("mock-nv:0")
        assert d.os.live_objects()["nv_violations"] == 0
        b = d.alloc(64)  # the first device is untouched
        d.copyin(b, bytes(64))
    finally:
        d.close()


def test_queues_refuse_another_devices_signal(pair: tuple[Device, Device]) -> None:
    from runtime.hcq import QueueError
    d0, d1 = pair
    s0 = d0.new_signal(0)
    for q in (d1.copy_queue(), d1.compute_queue()):
        with pytest.raises(QueueError, match=rf"belongs to {d0.name}; .*{d1.name}.map_signal"):
            q.wait(s0, 1)
        with pytest.raises(QueueError, match=rf"belongs to {d0.name}"):
            q.signal(s0, 1)
    d1.copy_queue().wait(d1.map_signal(s0), 0).submit()  # the mapped view is accepted
    d1.synchronize()


def test_kfd_maps_one_buffer_on_several_gpus_in_one_call() -> None:
    """AMDKFD_IOC_MAP_MEMORY_TO_GPU with two gpu ids; a bad id stops the call at n_success."""
    d0, d1 = open_devices("mock-amd:0", "mock-amd:1")
    try:
        mem = d0.alloc(4096, kind=MemKind.GTT).handle  # mapped on GPU 0 by the allocator
        g0, g1 = d0.node.gpu_id, d1.node.gpu_id  # type: ignore[attr-defined]
        bo = d0.os.drivers[0].proc.bos[mem.handle]
        d0.kfd.unmap_memory(mem.handle, [g0])  # type: ignore[attr-defined]
        d0.kfd.map_memory(mem.handle, [g0, g1])  # type: ignore[attr-defined]
        assert bo.mapped_on == {g0, g1}
        d0.kfd.unmap_memory(mem.handle, [g1, g0])  # type: ignore[attr-defined]
        assert bo.mapped_on == set()
        with pytest.raises(IoctlError, match="AMDKFD_IOC_MAP_MEMORY_TO_GPU") as e:
            d0.kfd.map_memory(mem.handle, [g0, 0x7777])  # type: ignore[attr-defined]
        assert e.value.errno == errno.EINVAL and bo.mapped_on == {g0}  # the first one stayed
    finally:
        d1.close()
        d0.close()
    assert d0.os.live_objects()["kfd_bos"] == 0
