"""DS instructions with the GDS bit on the RDNA3 interpreter: what a KFD compute queue on gfx11
gets from GDS memory, ordered count, the GS registers and global wave sync (see ops_gds for the
sources). Programs are assembled with llvm-mc-16."""
from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

from runtime.drivers.mock.rdna3 import KernelFault

from .test_rdna3_isa import assemble, pytestmark  # noqa: F401  (llvm-mc-16 needed)
from .rdna3_device import RawDevice

u32 = np.uint32


BRANCH = re.compile(r"^(s_branch|s_cbranch_\w+)\s+([A-Za-z_]\w*)$")


def assemble_labels(text: str) -> bytes:
    """llvm-mc-16 with branch labels resolved (its --show-encoding leaves them as fixups): the
    program is assembled once with every label at offset 0 to learn the instruction sizes, then
    with each SOPP branch's dword offset from the next instruction."""
    insts: list[str] = []
    labels: dict[str, int] = {}
    for line in text.splitlines():
        line = line.split("//")[0].strip()
        if line.endswith(":"):
            labels[line[:-1]] = len(insts)
        elif line:
            insts.append(line)
    first = assemble("\n".join(BRANCH.sub(r"\1 0", i) for i in insts))
    res = subprocess.run(["llvm-mc-16", "-arch=amdgcn", "-mcpu=gfx1100", "--show-encoding"],
                         input="\n".join(BRANCH.sub(r"\1 0", i) for i in insts),
                         capture_output=True, text=True)
    sizes = [len(m.group(1).split(",")) for m in re.finditer(r"encoding: \[([^\]]*)\]",
                                                               res.stdout)]
    assert len(sizes) == len(insts) and sum(sizes) == len(first)
    at = [sum(sizes[:k]) for k in range(len(insts) + 1)]
    out = []
    for k, i in enumerate(insts):
        m = BRANCH.match(i)
        if m:
            i = f"{m.group(1)} {(at[labels[m.group(2)]] - at[k + 1]) // 4}"
        out.append(i)
    return assemble("\n".join(out))


def launch(body: str, *, waves: int = 1, user: tuple[int, ...] = (), **kw) -> RawDevice:
    dev = RawDevice()
    dev.launch_raw(assemble_labels(body + "\ns_endpgm\n"), list(user), (waves,), (32,), **kw)
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
    dev = RawDevice()
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


# -- GWS with a range (DispatchRecord.gws): the ISA's semaphores and barriers -------------------
from runtime.drivers.mock.rdna3 import interp  # noqa: E402
from runtime.drivers.mock.rdna3.gws import GwsRange  # noqa: E402

# s[0:1] = output, s2 = workgroup id (one wave per workgroup); v9 = 0 (a store address).
PRODUCER_CONSUMER = """
s_mov_b32 m0, 0
v_mov_b32 v9, 0
s_cmp_eq_u32 s2, 0
s_cbranch_scc0 producer
ds_gws_sema_p offset:1 gds
global_load_b32 v1, v9, s[0:1]
s_waitcnt vmcnt(0)
global_store_b32 v9, v1, s[0:1] offset:4
s_endpgm
producer:
v_mov_b32 v1, 0x1234
global_store_b32 v9, v1, s[0:1]
s_waitcnt vmcnt(0)
ds_gws_sema_v offset:1 gds
s_endpgm
"""


def run_gws(body: str, waves: int, gws: GwsRange, out_words: int = 8) -> np.ndarray:
    dev = RawDevice()
    out = dev.upload(np.zeros(out_words, u32))
    dev.launch_raw(assemble_labels(body), [out & 0xFFFFFFFF, out >> 32], (waves,), (32,),
                   gws=gws)
    return dev.download(out, out_words, u32)


def test_sema_p_waits_for_the_sema_v_of_another_workgroup():
    """Workgroup 0 reaches sema_p first (lowest pc runs first) with the counter at 0: it queues
    until workgroup 1 has stored and signalled, then reads that store."""
    gws = GwsRange()
    got = run_gws(PRODUCER_CONSUMER, 2, gws)
    assert got[1] == 0x1234
    assert gws.resources[1].counter == 0 and not gws.resources[1].queue


def test_sema_v_before_sema_p_lets_it_through_and_state_outlives_the_dispatch():
    gws = GwsRange()
    gws.resources[1].counter = 1       # a sema_v of an earlier dispatch
    got = run_gws(PRODUCER_CONSUMER.replace("s_cbranch_scc0 producer", "s_nop 0"), 1, gws)
    assert got[1] == 0                  # passed at once: nothing was stored before it
    assert gws.resources[1].counter == 0


GWS_BARRIER = """
s_mov_b32 m0, 0
v_mov_b32 v9, 0
v_mov_b32 v1, 3                     // the next barrier's count: 4 waves - 1
s_lshl_b32 s3, s2, 2
v_mov_b32 v5, s3
v_add_nc_u32 v6, 1, v5              // a marker: workgroup id + 1
v_mov_b32 v6, s2
v_add_nc_u32 v6, 1, v6
s_cmp_eq_u32 s2, 0
s_cbranch_scc1 late
global_store_b32 v5, v6, s[0:1]
s_waitcnt vmcnt(0)
ds_gws_barrier v1 gds
s_branch read
late:
global_store_b32 v5, v6, s[0:1]
s_waitcnt vmcnt(0)
ds_gws_barrier v1 gds
read:
global_load_b128 v[10:13], v9, s[0:1]
s_waitcnt vmcnt(0)
v_add_nc_u32 v10, v10, v11
v_add3_u32 v10, v10, v12, v13
global_store_b32 v5, v10, s[0:1] offset:16
s_endpgm
"""


def test_gws_barrier_holds_waves_of_all_workgroups_until_the_last_arrives():
    """Workgroups 1-3 reach their barrier first and wait (the counter, set by an earlier
    dispatch's ds_gws_init to 3, counts down to 0); workgroup 0 stores its marker late and
    releases them: every wave then reads all four markers (1+2+3+4)."""
    gws = GwsRange()
    run_gws("s_mov_b32 m0, 0\nv_mov_b32 v0, 3\nds_gws_init v0 gds\ns_endpgm\n", 1, gws)
    assert gws.resources[0].counter == 3
    got = run_gws(GWS_BARRIER, 4, gws)
    np.testing.assert_array_equal(got[4:8], [10, 10, 10, 10])
    assert gws.resources[0].barrier and gws.resources[0].flag == 1
    assert gws.resources[0].counter == 3   # armed for the next barrier by the last wave


def test_release_all_frees_every_queued_wave():
    body = """
    s_mov_b32 m0, 0
    v_mov_b32 v9, 0
    s_cmp_eq_u32 s2, 3
    s_cbranch_scc1 release
    ds_gws_sema_p gds
    s_lshl_b32 s3, s2, 2
    v_mov_b32 v5, s3
    v_mov_b32 v6, 7
    global_store_b32 v5, v6, s[0:1]
    s_endpgm
    release:
    ds_gws_sema_release_all gds
    s_endpgm
    """
    gws = GwsRange()
    got = run_gws(body, 4, gws)
    np.testing.assert_array_equal(got[:4], [7, 7, 7, 0])
    assert gws.resources[0].counter == 0


def test_sema_br_takes_the_count_from_the_first_active_lane():
    body = """
    s_mov_b32 m0, 2 << 16
    v_add_nc_u32 v1, 5, v0          // lane i holds 5 + i
    s_mov_b32 exec_lo, 0xFFFFFFF0   // the first active lane is lane 4
    ds_gws_sema_br v1 offset:1 gds
    s_endpgm
    """
    gws = GwsRange()
    run_gws(body, 1, gws)
    assert gws.resources[3].counter == 9 and not gws.resources[3].barrier


def test_a_wave_no_running_wave_can_release_faults_instead_of_hanging():
    gws = GwsRange()
    e = fault_of("s_mov_b32 m0, 0\nds_gws_sema_p offset:5 gds", waves=2, gws=gws)
    assert "wait forever" in str(e) and "every other wave" in str(e)
    assert "queued at GWS resource 5" in str(e)
    assert e.instruction == "ds_gws_sema_p offset:5 gds"
    # The faulted dispatch's waves leave the queue: a later dispatch's sema_p is not stuck
    # behind them once the counter allows it.
    assert not gws.resources[5].queue
    gws.resources[5].counter = 1
    launch("s_mov_b32 m0, 0\nds_gws_sema_p offset:5 gds", gws=gws)
    assert gws.resources[5].counter == 0


def test_releasers_in_a_later_batch_are_named(monkeypatch):
    """Workgroups 0-3 wait for workgroup 4's sema_br, which the mock would start only after
    them (here 4 workgroups per batch): a fault, not a hang."""
    monkeypatch.setattr(interp, "BATCH_MAX_WAVES", 4)
    body = """
    s_mov_b32 m0, 0
    v_mov_b32 v1, 4
    s_cmp_eq_u32 s2, 4
    s_cbranch_scc1 release
    ds_gws_sema_p gds
    s_endpgm
    release:
    ds_gws_sema_br v1 gds
    s_endpgm
    """
    e = fault_of(body, waves=5, user=(0, 0, 0), gws=GwsRange())
    assert "the 1 workgroups not started yet" in str(e) and "4 workgroups at a time" in str(e)


def test_a_resource_outside_the_range_is_a_nack():
    e = fault_of("s_mov_b32 m0, 0\nds_gws_sema_v offset:5 gds", gws=GwsRange(base=8, size=4))
    assert "GWS resource 13 is outside this queue's GWS range [8, 12)" in str(e)


def test_s_barrier_beside_queued_waves_passes_only_for_free_workgroups():
    """Two waves per workgroup. In workgroup 0 wave 0 queues at sema_p and its partner waits at
    s_barrier, which cannot pass until wave 0 arrives; workgroup 1's waves pass their s_barrier
    and signal twice. The partner then reads what wave 0 stored before the barrier."""
    body = """
    s_mov_b32 m0, 0
    v_mov_b32 v9, 0
    s_cmp_eq_u32 s2, 0
    s_cbranch_scc0 other
    v_readfirstlane_b32 s4, v0
    s_cmp_lt_u32 s4, 32
    s_cbranch_scc0 partner
    ds_gws_sema_p gds
    v_mov_b32 v1, 0x77
    global_store_b32 v9, v1, s[0:1]
    s_waitcnt vmcnt(0)
    s_barrier
    s_endpgm
    partner:
    s_barrier
    global_load_b32 v1, v9, s[0:1]
    s_waitcnt vmcnt(0)
    global_store_b32 v9, v1, s[0:1] offset:4
    s_endpgm
    other:
    s_barrier
    ds_gws_sema_v gds
    s_endpgm
    """
    dev = RawDevice()
    out = dev.upload(np.zeros(2, u32))
    gws = GwsRange()
    dev.launch_raw(assemble_labels(body), [out & 0xFFFFFFFF, out >> 32], (2,), (64,), gws=gws)
    np.testing.assert_array_equal(dev.download(out, 2, u32), [0x77, 0x77])
    assert gws.resources[0].counter == 1 and not gws.resources[0].queue   # two V, one P


def test_gws_semaphore_in_wave64_kernels():
    """A wave64 is one wave to the GWS unit (its two 32-lane rows queue and pass together)."""
    dev = RawDevice()
    out = dev.upload(np.zeros(8, u32))
    gws = GwsRange()
    dev.launch_raw(assemble_labels(PRODUCER_CONSUMER), [out & 0xFFFFFFFF, out >> 32], (2,),
                   (64,), gws=gws, wave64=True)
    assert dev.download(out, 2, u32)[1] == 0x1234
    assert gws.resources[1].counter == 0 and not gws.resources[1].queue
