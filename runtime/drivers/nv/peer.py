"""Peer access between two NVIDIA GPUs of one process, through RM and UVM alone.

Each `NVDevice` has its own RM client and its own UVM VA space, so a device that maps another GPU's
video memory needs, in *its* client and VA space (open-gpu-kernel-modules 580):
  1. NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS for the two GPU ids: reads and writes must be supported
     (the same query CUDA's cuDeviceCanAccessPeer answers from).
  2. An NV01_DEVICE_0 + NV20_SUBDEVICE_0 of the other GPU, and an NV50_P2P object between the two
     subdevices (p2p_api.c: both subdevices must be the client's own; RM gives the pair a peer id).
  3. UVM_REGISTER_GPU of the other GPU and UVM_ENABLE_PEER_ACCESS of the pair (uvm_va_space.c:
     both registered, P2P-capable).
Then each buffer: NV_ESC_RM_DUP_OBJECT of the other client's memory under the other GPU's device
object here, NV_ESC_RM_MAP_MEMORY_DMA with NVOS46_FLAGS_P2P_ENABLE_NOSLI into this device's virtual
memory (the peer aperture needs the NV50_P2P's peer id), UVM_CREATE_EXTERNAL_RANGE and
UVM_MAP_EXTERNAL_ALLOCATION for this GPU (UVM checks that peer access is enabled). Host memory needs
none of this: the same pages are described to this device's RM as an OS descriptor of its own.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable

from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv.methods import fget
from runtime.drivers.nv.rm import RmError

if TYPE_CHECKING:
    from runtime.drivers.nv.device import NVDevice

_STATUS_NAMES = {
    rm.NV0000_P2P_CAPS_STATUS_OK: "ok",
    rm.NV0000_P2P_CAPS_STATUS_CHIPSET_NOT_SUPPORTED: "the chipset does not support it",
    rm.NV0000_P2P_CAPS_STATUS_GPU_NOT_SUPPORTED: "the GPU does not support it",
    rm.NV0000_P2P_CAPS_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED: "the PCIe topology does not support it",
    rm.NV0000_P2P_CAPS_STATUS_DISABLED_BY_REGKEY: "disabled by a driver registry key",
    rm.NV0000_P2P_CAPS_STATUS_NOT_SUPPORTED: "not supported",
}


def p2p_caps(dev: "NVDevice", other: "NVDevice") -> str | None:
    """None when RM reports P2P reads and writes between the two GPUs, else why not."""
    p = rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_PARAMS(gpuCount=2)
    p.gpuIds[0], p.gpuIds[1] = dev.gpu_id, other.gpu_id
    try:
        dev.rm.control(dev.rm.root, rm.NV0000_CTRL_CMD_SYSTEM_GET_P2P_CAPS, p)
    except RmError as e:
        return f"RM could not report P2P capabilities ({e})"
    reads = fget(rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_READS_SUPPORTED, p.p2pCaps)
    writes = fget(rm.NV0000_CTRL_SYSTEM_GET_P2P_CAPS_WRITES_SUPPORTED, p.p2pCaps)
    if reads and writes:
        return None
    rd = p.p2pCapsStatus[rm.NV0000_CTRL_P2P_CAPS_INDEX_READ]
    wr = p.p2pCapsStatus[rm.NV0000_CTRL_P2P_CAPS_INDEX_WRITE]
    return (f"RM reports no P2P between GPU ids {dev.gpu_id:#x} ({dev.name}) and "
            f"{other.gpu_id:#x} ({other.name}): reads {_STATUS_NAMES.get(rd, rd)}, writes "
            f"{_STATUS_NAMES.get(wr, wr)}")


class PeerLink:
    """What `dev` holds to map `other`'s video memory (steps 2 and 3 of the module docstring);
    `close` undoes it in reverse. Made on the first peer mapping, closed with `dev`."""

    def __init__(self, dev: "NVDevice", other: "NVDevice") -> None:
        self.dev, self.other_uuid = dev, other.uuid
        self.other_name = other.name
        self.remote_device = self.remote_subdevice = self.p2p = 0
        self._uvm_gpu = self._uvm_peer = False
        r = dev.rm
        try:
            self.remote_device = r.alloc(r.root, rm.NV01_DEVICE_0, rm.NV0080_ALLOC_PARAMETERS(
                deviceId=other.device_instance, hClientShare=r.root,
                vaMode=rm.NV_DEVICE_ALLOCATION_VAMODE_OPTIONAL_MULTIPLE_VASPACES))
            self.remote_subdevice = r.alloc(self.remote_device, rm.NV20_SUBDEVICE_0,
                                            rm.NV2080_ALLOC_PARAMETERS())
            self.p2p = r.alloc(r.root, rm.NV50_P2P, rm.NV503B_ALLOC_PARAMETERS(
                hSubDevice=dev.subdevice, hPeerSubDevice=self.remote_subdevice))
            dev.uvm.register_gpu(other.uuid)
            self._uvm_gpu = True
            dev.uvm.enable_peer_access(dev.uuid, other.uuid)
            self._uvm_peer = True
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Disables UVM peer access, unregisters the other GPU, frees the RM objects (reverse)."""
        dev = self.dev
        errors: list[BaseException] = []
        steps: list[Callable[[], Any]] = []
        if self._uvm_peer:
            steps.append(lambda: dev.uvm.disable_peer_access(dev.uuid, self.other_uuid))
        if self._uvm_gpu:
            steps.append(lambda: dev.uvm.unregister_gpu(self.other_uuid))
        for h in (self.p2p, self.remote_subdevice, self.remote_device):
            if h and h in dev.rm.objects:
                steps.append(functools.partial(dev.rm.free, h))
        self._uvm_peer = self._uvm_gpu = False
        self.p2p = self.remote_subdevice = self.remote_device = 0
        for step in steps:
            try:
                step()
            except BaseException as e:  # keep undoing; report the first problem
                errors.append(e)
        if errors:
            raise errors[0]
