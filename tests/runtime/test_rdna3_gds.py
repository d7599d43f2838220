"""DS instructions with the GDS bit on the RDNA3 interpreter: what a KFD compute queue on gfx11
gets from GDS memory, ordered count, the GS registers and global wave sync (see ops_gds for the
sources). Programs are assembled with llvm-mc-16."""
from __future__ import annotations

import re

import numpy as np
import pytest

from runtime.drivers.mock.rdna3 import KernelFault
from runtime.drivers.mock.rdna3.loader_for_tests import TestDevice

from .test_rdna3_isa import assemble, pytestmark  # noqa: F401  (llvm-mc-16 needed)

u32 = np.uint32


def launch(body: str, *, waves: int = 1, user: tuple[int, ...] = (), **kw) -> TestDevice:
    dev = TestDevice()
    dev.launch_raw(assemble(body + "\ns_endpgm\n"), list(user), (waves,), (32,), **kw)
    return dev


def fault_of(body: str, **kw) -> KernelFault:
    with pytest.raises(KernelFault) as e:
        launch(body, **kw)
    return e.value


# -- GDS memory, ordered count, GS registers: a compute VMID has none --------------------------
@pytest.mark.parametrize("inst", ["ds_add_u32 v0, v1 gds", "ds_load_b32 v1, v0 gds",
                                  "ds_store_b32 v0, v1 offset:8 gds",
                                  "ds_cmpstore_rtn_b32 v2, v0, v1, v3 gds"])
def test_gds_memory_access_faults_naming_the_instruction(inst):
    e = fault_of(f"v_mov_b32 v0, 0\n{inst}")
    assert "GDS access outside this queue's GDS range" in str(e)
    assert "GDS_VMID size 0" in str(e)
    assert e.instruction == inst and e.address is not None


def test_gds_access_with_no_active_lane_touches_nothing():
    """With EXEC empty no lane addresses GDS: the kernel goes on (its store after runs)."""
    dev = TestDevice()
    out = dev.upload(np.zeros(1, u32))
    body = """
    s_mov_b32 s4, exec_lo
    s_mov_b32 exec_lo, 0
    ds_store_b32 v0, v1 gds
    s_mov_b32 exec_lo, s4
    v_mov_b32 v2, 0x600d
    v_mov_b32 v3, 0
    global_store_b32 v3, v2, s[0:1]
    s_endpgm
    """
    dev.launch_raw(assemble(body), [out & 0xFFFFFFFF, out >> 32], (1,), (32,))
    assert dev.download(out, 1, u32)[0] == 0x600D


def test_ordered_count_faults_for_want_of_gds_and_oa_counters():
    e = fault_of("v_mov_b32 v1, 31\nds_ordered_count v0, v1 offset:772 gds")
    assert "ordered-append counter" in str(e) and "GDS_OA_VMID 0" in str(e)
    assert e.instruction == "ds_ordered_count v0, v1 offset:772 gds"


@pytest.mark.parametrize("inst, what", [
    ("ds_add_gs_reg_rtn v[0:1], v2 offset:4 gds", "GS register 1 (OFFSET0[5:2] = 1)"),
    ("ds_sub_gs_reg_rtn v[0:1], v2 offset:36 gds", "GS registers 10-11 (64-bit)"),
])
def test_gs_register_ops_fault_naming_the_register(inst, what):
    """OFFSET0[5:2] picks the register; 8 and above address 64-bit pairs from register 8 on
    (the ISA's pseudocode: addr = (OFFSET0[5:2] - 8) * 2 + 8)."""
    e = fault_of(inst)
    assert what in str(e) and "compute queue does not own" in str(e)
    assert e.instruction == inst


# -- GWS without a range: the hardware NACKs and halts the wave --------------------------------
@pytest.mark.parametrize("inst", ["ds_gws_init v0 gds", "ds_gws_sema_v gds",
                                  "ds_gws_sema_br v0 gds", "ds_gws_sema_p gds",
                                  "ds_gws_sema_release_all gds", "ds_gws_barrier v0 gds"])
def test_gws_ops_of_a_queue_without_gws_fault_instead_of_hanging(inst):
    e = fault_of(f"s_mov_b32 m0, 0\nv_mov_b32 v0, 1\n{inst}")
    assert "outside this queue's GWS range" in str(e) and "NACK" in str(e)
    assert e.instruction == inst


@pytest.mark.parametrize("m0, offset, rid", [(5 << 16, 3, 8), (63 << 16, 2, 1),
                                             (0xFFC0FFFF, 7, 7)])
def test_gws_resource_id_is_m0_21_16_plus_offset_mod_64(m0, offset, rid):
    """Only M0[21:16] counts (bits above and below are ignored) and the sum wraps at 64."""
    e = fault_of(f"s_mov_b32 m0, {m0:#x}\nds_gws_sema_v offset:{offset} gds")
    assert re.search(rf"GWS resource {rid} \(", str(e)), str(e)
