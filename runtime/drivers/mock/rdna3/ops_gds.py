"""DS instructions with the GDS bit: global data share memory, ordered count, GS registers and
global wave sync (GWS), as a KFD compute queue on gfx11 has them.

What the hardware gives a compute queue (Linux amdgpu/amdkfd, RDNA3 ISA section "Global Wave
Sync"):
* GDS memory and the ordered-append counters: none. gfx_v11_0_init_compute_vmid programs every
  compute VMID with GDS_VMID*_BASE/SIZE 0 and GDS_OA_VMID 0, and KFD's topology reports
  gds_size_in_kb 0. The ISA does not say what an access outside the VMID's GDS range returns, so
  the mock faults (naming the instruction) rather than guess a value: a compute kernel that
  touches GDS, ds_ordered_count (an ordered-append GDS counter) included, depends on something
  KFD never provides.
* GS registers (ds_add/sub_gs_reg_rtn: the NGG streamout counters of the graphics pipeline,
  OFFSET0[5:2] picks one; 8 and above are 64-bit pairs): graphics state that a compute queue does
  not own; the documents are silent on a compute wave reaching them, so the mock faults.
* GWS: the resource id is (VMID base + M0[21:16] + OFFSET0[5:0]) % 64 and ids outside the
  VMID's range make the GWS answer NACK, which rewinds the wave's PC and halts it (a hang). On
  gfx11 KFD assigns no range to a compute VMID (GDS_GWS_VMID 0; with MES, AMDKFD_IOC_ALLOC_QUEUE_GWS
  only marks the queue exclusively scheduled, for cooperative launches), so every ds_gws_* of a
  KFD queue would hang: the mock faults instead, naming the instruction and the resource id.
  With a range (`DispatchRecord.gws`) the ops run as the ISA describes (`gws`).
"""
from __future__ import annotations

from typing import Callable

from .decode import Inst
from .errors import KernelFault
from .gws import GWS_OPS, compile_gws
from .machine import WaveSet

Exec = Callable[[WaveSet], None]

GS_REG_OPS = ("ds_add_gs_reg_rtn", "ds_sub_gs_reg_rtn")


def compile_gds(inst: Inst) -> Exec:
    """The slot of a DS instruction whose GDS bit is set (a GWS op or a GDS access)."""
    name, f = inst.name, inst.f
    if name in GWS_OPS:
        return compile_gws(inst)   # type: ignore[return-value]  # a WAIT step (interp)
    if name in GS_REG_OPS:
        reg = f["offset0"] >> 2 & 0xF
        what = (f"GS register {reg}" if reg < 8
                else f"GS registers {(reg - 8) * 2 + 8}-{(reg - 8) * 2 + 9} (64-bit)")

        def gs_reg(g: WaveSet) -> None:
            raise KernelFault(f"{name} reaches {what} (OFFSET0[5:2] = {reg}), NGG streamout "
                              "state of the graphics pipeline that a compute queue does not own",
                              address=inst.addr, instruction=str(inst))
        return gs_reg
    if name == "ds_ordered_count":
        def ordered(g: WaveSet) -> None:
            raise KernelFault("ds_ordered_count needs a GDS ordered-append counter; a KFD "
                              "compute queue has no GDS and no OA counters (GDS_VMID size 0, "
                              "GDS_OA_VMID 0; topology gds_size_in_kb 0)",
                              address=inst.addr, instruction=str(inst))
        return ordered

    def gds_access(g: WaveSet) -> None:
        if not g.active:
            return   # no lane accesses GDS
        raise KernelFault("GDS access outside this queue's GDS range: KFD gives a compute VMID "
                          "no GDS (GDS_VMID size 0, topology gds_size_in_kb 0)",
                          address=inst.addr, instruction=str(inst))
    return gds_access


def kfd_queue_fault(inst: Inst) -> str | None:
    """Why `inst` faults on every queue a gfx11 KFD makes (for the static audit): a DS
    instruction with the GDS bit; None for any other instruction."""
    if inst.enc != "DS" or not inst.f["gds"]:
        return None
    if inst.name in GWS_OPS:
        return "a GWS op: a gfx11 KFD compute queue has no GWS range (the hardware halts the wave)"
    if inst.name in GS_REG_OPS:
        return "a GS register access: graphics-pipeline state a compute queue does not own"
    if inst.name == "ds_ordered_count":
        return "needs a GDS ordered-append counter: a KFD compute queue has none"
    return "a GDS access: a KFD compute queue has no GDS"
