"""AMDKFD_IOC_ALLOC_QUEUE_GWS on the mock KFD, with the real ioctl's checks (kfd_chardev.c
kfd_ioctl_alloc_queue_gws, kfd_process_queue_manager.c pqm_set_gws), through the runtime's
`Kfd.alloc_queue_gws`."""
from __future__ import annotations

import errno

import numpy as np
import pytest

from runtime.drivers.amd.device import AMDDevice
from runtime.drivers.amd.kfd import IoctlError
from runtime.drivers.mock.os import MockOS


def _device(**kw) -> tuple[AMDDevice, MockOS]:  # type: ignore[no-untyped-def]
    mos = MockOS.with_amd_gpus(1, **kw)
    return AMDDevice("mock-amd:0", os=mos), mos


@pytest.fixture
def dm():  # type: ignore[no-untyped-def]
    d, mos = _device()
    yield d, mos
    d.close()


def _queue(mos: MockOS, qid: int):  # type: ignore[no-untyped-def]
    return mos.drivers[0].proc.queues[qid]


def test_one_queue_per_process_holds_the_gws(dm) -> None:  # type: ignore[no-untyped-def]
    dev, mos = dm
    assert dev.node.properties["num_gws"] == 64
    qid = dev.compute_ring.queue_id
    assert dev.kfd.alloc_queue_gws(qid, 64) == 0          # first_gws: always 0
    assert _queue(mos, qid).gws
    other = dev.copy_ring.queue_id
    with pytest.raises(IoctlError) as e:
        dev.kfd.alloc_queue_gws(other, 1)
    assert e.value.errno == errno.EBUSY and "another queue" in str(e.value)
    dev.kfd.alloc_queue_gws(qid, 0)                       # given back
    assert not _queue(mos, qid).gws
    assert dev.kfd.alloc_queue_gws(other, 1) == 0         # now free for another queue


def test_giving_back_gws_the_process_does_not_hold_is_einval(dm) -> None:  # type: ignore
    dev, _ = dm
    with pytest.raises(IoctlError) as e:
        dev.kfd.alloc_queue_gws(dev.compute_ring.queue_id, 0)
    assert e.value.errno == errno.EINVAL


def test_an_unknown_queue_is_einval(dm) -> None:  # type: ignore[no-untyped-def]
    dev, _ = dm
    with pytest.raises(IoctlError) as e:
        dev.kfd.alloc_queue_gws(999, 64)
    assert e.value.errno == errno.EINVAL and "ALLOC_QUEUE_GWS" in str(e.value)


def test_destroying_the_holder_frees_the_gws(dm) -> None:  # type: ignore[no-untyped-def]
    dev, mos = dm
    make, release = dev._stream_hw()
    q = make()
    qid = q.ring.queue_id
    dev.kfd.alloc_queue_gws(qid, 64)
    release()
    assert dev.kfd.alloc_queue_gws(dev.compute_ring.queue_id, 64) == 0


def test_a_gpu_without_gws_reports_none_and_refuses() -> None:
    """kfd_gws_init allocates nothing with MES firmware older than 68: num_gws 0, ENODEV."""
    dev, _ = _device(gws=False)
    try:
        assert dev.node.properties["num_gws"] == 0
        with pytest.raises(IoctlError) as e:
            dev.kfd.alloc_queue_gws(dev.compute_ring.queue_id, 64)
        assert e.value.errno == errno.ENODEV and "num_gws 0" in str(e.value)
    finally:
        dev.close()


GWS_CL = """
__kernel void gws_barrier(__global int *out) {
  __builtin_amdgcn_ds_gws_init(3, 0);      /* 4 waves - 1 */
  __builtin_amdgcn_ds_gws_barrier(3, 0);
  out[get_global_id(0)] = (int)get_group_id(0) + 1;
}
"""


def _gws_code_object() -> bytes:
    from runtime.drivers.amd.compiler import AMDCompiler
    why = AMDCompiler().available()
    if why is not None:
        pytest.skip(f"OpenCL compiler unavailable: {why}")
    return AMDCompiler().compile(GWS_CL)


def test_clang_gws_builtins_fault_on_a_kfd_queue_holding_the_gws(dm) -> None:  # type: ignore
    """clang-16's __builtin_amdgcn_ds_gws_* on a KFD queue that holds the GWS: gfx11 MES gives
    the queue no GWS range, so the hardware would NACK and halt the wave; the mock reports it."""
    from runtime.hcq import DeviceFault
    dev, _ = dm
    co = _gws_code_object()
    dev.kfd.alloc_queue_gws(dev.compute_ring.queue_id, 64)
    prg = dev.program(co, "gws_barrier")
    out = dev.alloc(4 * 128)
    with pytest.raises(DeviceFault) as e:
        prg(out, global_size=(4, 1, 1), local_size=(32, 1, 1), wait=True)
    assert "ds_gws_init" in str(e.value) and "outside this queue's GWS range" in str(e.value)


def test_clang_gws_barrier_runs_with_a_gws_range() -> None:
    """The same code object on the interpreter with a GWS range (DispatchRecord.gws): every
    wave initialises the count, three wait at the barrier, the fourth releases them."""
    from runtime.drivers.mock.rdna3.gws import GwsRange

    from .rdna3_device import DriverDevice
    co = _gws_code_object()
    dev = DriverDevice()
    try:
        out = dev.upload(np.zeros(128, np.int32))
        gws = GwsRange()
        dev.launch(dev.load(co, "gws_barrier"), [out], (4,), (32,), gws=gws)
        np.testing.assert_array_equal(dev.download(out, 128, np.int32),
                                      np.repeat([1, 2, 3, 4], 32))
        assert gws.resources[0].flag == 1 and gws.resources[0].counter == 3
    finally:
        dev.close()


def test_the_audit_lists_gws_instructions_before_a_launch() -> None:
    from runtime.drivers.mock.rdna3.audit import audit
    found = audit(_gws_code_object())
    assert [u.text.split()[0] for u in found] == ["ds_gws_init", "ds_gws_barrier"]
    assert all("no GWS range" in u.reason for u in found)
