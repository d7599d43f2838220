"""scripts/probe_nv_deps.py, the dependent-launch probe the H200 runs: each mechanism writes the QMD
fields it names into the right grids of a chain (a mistake there would cost a device run), and its
ordered mechanisms run end to end through the runtime on mock-nv, chains compared element by
element."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import pytest

from runtime.drivers.nv.qmd import QMDV04

from .script_util import loaded_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "probe_nv_deps.py"


@pytest.fixture(scope="module")
def probe() -> Iterator[ModuleType]:
    yield from loaded_script("probe_nv_deps")


def _chain(probe: Any, mech: str, n: int = 3) -> list[QMDV04]:
    """An n-launch chain of `mech` as the probe writes it (QMD i at 0x1000 * (i + 1))."""
    out = []
    for i in range(n):
        q = QMDV04()
        q.set_common(sass_version=0x90)
        q.set_cbuf(0, 0x10000, 0x310)
        probe.shape_qmd(probe.MECHS[mech], i, q, 0x1000 * (i + 2) if i + 1 < n else None, 0x8000)
        out.append(q)
    return out


def test_every_listed_mechanism_is_defined(probe):
    assert set(probe.GRAPH) <= set(probe.MECHS) and set(probe.STREAM) <= set(probe.MECHS)


def test_schedule_link_names_the_next_qmd_and_only_the_first_is_sent(probe):
    qs = _chain(probe, "qmd_schedule")
    for i, q in enumerate(qs[:-1]):
        assert q.get("DEPENDENT_QMD_ENABLE", 0) == 1
        assert q.get("DEPENDENT_QMD_ACTION", 0) == q.value("DEPENDENT_QMD_ACTION_QMD_SCHEDULE")
        assert q.get("DEPENDENT_QMD0_POINTER") == (0x1000 * (i + 2)) >> 8
        assert q.get("CWD_MEMBAR_TYPE") == q.value("CWD_MEMBAR_TYPE_L1_SYSMEMBAR")
    assert qs[-1].get("DEPENDENT_QMD_ENABLE", 0) == 0
    assert not probe.sends_every_qmd(probe.MECHS["qmd_schedule"])
    assert probe.sends_every_qmd(probe.MECHS["latch_seq"])


def test_latches_pair_each_grid_with_its_predecessor(probe):
    qs = _chain(probe, "latch_seq", 4)
    for i, q in enumerate(qs):
        assert q.get("ARRIVE_AT_LATCH_VALID") == (i < 3)
        assert q.get("ARRIVE_AT_LATCH_ID") == (i + 1 if i < 3 else 0)
        assert q.get("WAIT_ON_LATCH_VALID") == (i > 0)
        assert q.get("WAIT_ON_LATCH_ID") == i
        assert q.get("ENABLE_PROGRAM_PRE_EXIT") == 0 and q.get("DEPENDENT_QMD_ENABLE", 0) == 0
    fixed = _chain(probe, "latch_fixed")
    assert [q.get("ARRIVE_AT_LATCH_ID") for q in fixed] == [7, 7, 0]
    assert [q.get("WAIT_ON_LATCH_ID") for q in fixed] == [0, 7, 7]


def test_pdl_producers_pre_exit_at_their_last_cta_launch(probe):
    qs = _chain(probe, "pdl")
    assert [q.get("ENABLE_PROGRAM_PRE_EXIT") for q in qs] == [1, 1, 0]
    assert [q.get("PRE_EXIT_AT_LAST_CTA_LAUNCH") for q in qs] == [1, 1, 0]
    assert [q.get("DEPENDENT_QMD_ENABLE", 0) for q in qs] == [1, 1, 0]
    assert probe.MECHS["pdl"]["wait"] and "griddepcontrol.wait" in probe.SRC_WAIT


@pytest.mark.parametrize("mech, fields", [
    ("qmd_notex", ("INVALIDATE_TEXTURE_HEADER_CACHE", "INVALIDATE_TEXTURE_SAMPLER_CACHE")),
    ("qmd_nodinv", ("INVALIDATE_TEXTURE_DATA_CACHE", "INVALIDATE_SHADER_DATA_CACHE")),
])
def test_the_first_grid_keeps_every_invalidation(probe, mech, fields):
    qs = _chain(probe, mech)
    for f in fields:
        assert [q.get(f) for q in qs] == [1, 0, 0]
    assert [q.get("CONSTANT_BUFFER_INVALIDATE", 0) for q in _chain(probe, "qmd_nocb")] == [1, 0, 0]


def test_constant_bank_prefetch_covers_the_bank(probe):
    for q in _chain(probe, "qmd_lean"):
        assert q.get("CONSTANT_BUFFER_PREFETCH", 0) == \
            q.value("CONSTANT_BUFFER_PREFETCH_PREFETCH_PRE")
        assert q.get("CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8") == 4   # 0x310 B


def test_lower_bounds_keep_the_system_barrier_on_the_last_grid(probe):
    for mech in ("qmd_schedule_nomembar", "qmd_lean_nomembar"):
        qs = _chain(probe, mech)
        none, sysmembar = (qs[0].value("CWD_MEMBAR_TYPE_" + v) for v in ("L1_NONE", "L1_SYSMEMBAR"))
        assert [q.get("CWD_MEMBAR_TYPE") for q in qs] == [none, none, sysmembar]
    assert all(q.get("CWD_MEMBAR_TASK_CHASING_ENABLE") == 1 for q in _chain(probe, "qmd_chase"))


@pytest.mark.parametrize("job", ["graph:qmd_schedule", "stream:wfi", "stream:gate_load",
                                 "stream:gate_load_live", "stream:gate_load_delay",
                                 "stream:gate_load_l1", "stream:wfi_tl"])
def test_ordered_mechanisms_run_on_mock_nv(job):
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", job, "--device", "mock-nv:0", "--n", "8",
         "--reps", "1", "--chain", "4", "--chain-replays", "2", "--chain-elements", "2048",
         "--child-timeout", "120"],
        capture_output=True, text=True, timeout=150, cwd=ROOT)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("JSON")), None)
    assert line is not None, r.stderr[-2000:]
    row = json.loads(line[4:])
    assert row["inc_ok"] and row["inc_min_max"] == [8, 8]
    assert row["chain_ok"] and row["chain_launches"] == 8
    assert row["host_chain_bad"] == 0


CUDA_PDL = {"pdl_graph": {
    "linked": {"QMD_TYPE": 2, "CWD_MEMBAR_TYPE": 1, "DEPENDENT_QMD_ENABLE(0)": 1,
               "DEPENDENT_QMD_ACTION(0)": 4, "DEPENDENT_QMD_PREFETCH(0)": 0,
               "DEPENDENCE_COUNTER": 1, "ENABLE_PROGRAM_PRE_EXIT": 1, "SAMPLER_INDEX": 1,
               "CONSTANT_BUFFER_INVALIDATE(0)": 1, "INVALIDATE_SHADER_DATA_CACHE": 1},
    "last": {"QMD_TYPE": 2, "CWD_MEMBAR_TYPE": 1, "DEPENDENCE_COUNTER": 1, "SAMPLER_INDEX": 1,
             "CONSTANT_BUFFER_INVALIDATE(0)": 1, "INVALIDATE_SHADER_DATA_CACHE": 1},
    "count": 6, "linked_count": 5}}


def test_a_clone_takes_cudas_ordering_fields_and_keeps_the_kernels(probe):
    k = probe.resolve_clone(probe.MECHS["cuda_pdl_graph"], CUDA_PDL)
    assert k["link"] == "counter" and k["nopf"] and k["wait"]
    qs = []
    for i in range(3):
        q = QMDV04()
        q.set_common(sass_version=0x90)
        q.set_cbuf(0, 0x10000, 0x310)
        q.set_registers(24)
        q.set_grid(8, 1, 1)
        q.write(INVALIDATE_TEXTURE_HEADER_CACHE=1, API_VISIBLE_CALL_LIMIT=1)
        probe.shape_qmd(k, i, q, 0x1000 * (i + 2) if i < 2 else None, 0x8000)
        qs.append(q)
    # CUDA's ordering fields, ours cleared where CUDA has none
    assert [q.get("ENABLE_PROGRAM_PRE_EXIT") for q in qs] == [1, 1, 0]
    assert [q.get("DEPENDENCE_COUNTER") for q in qs] == [0, 1, 1]   # the first waits on nothing
    assert all(q.get("INVALIDATE_TEXTURE_HEADER_CACHE") == 0 and q.get("API_VISIBLE_CALL_LIMIT")
               == 0 for q in qs)
    # the link is CUDA's action, pointing at our next QMD
    action = QMDV04.value("DEPENDENT_QMD_ACTION_QMD_DECREMENT_DEPENDENCE")
    assert [q.get("DEPENDENT_QMD_ACTION", 0) for q in qs] == [action, action, 0]
    assert [q.get("DEPENDENT_QMD0_POINTER") for q in qs] == [0x20, 0x30, 0]
    assert [q.get("DEPENDENT_QMD_PREFETCH", 0) for q in qs] == [0, 0, 0]
    # the kernel's and the shape's fields are untouched
    assert all(q.get("REGISTER_COUNT") == 24 and q.get("GRID_WIDTH") == 8
               and q.get("CONSTANT_BUFFER_VALID", 0) == 1 for q in qs)


def test_a_runnable_clone_starts_its_first_grid_and_drops_what_stopped_the_channel(probe):
    """CUDA's graph QMDs all wait for a scheduling PCAS and copy themselves back; cloned as they
    are, the first grid never started. The runnable clone sends the later grids ahead (their
    predecessor's link starts them) and lets the first one run."""
    fields = {"graph": {"linked": {"QMD_TYPE": 2, "REQUIRE_SCHEDULING_PCAS": 1,
                                   "SELF_COPY_ON_COMPLETION": 1, "CONSTANT_BUFFER_PREFETCH(5)": 2,
                                   "DEPENDENT_QMD_ENABLE(0)": 1, "DEPENDENT_QMD_PREFETCH(0)": 1,
                                   "DEPENDENT_QMD_ACTION(0)":
                                   QMDV04.value("DEPENDENT_QMD_ACTION_QMD_SCHEDULE")},
                        "last": {"QMD_TYPE": 2, "REQUIRE_SCHEDULING_PCAS": 1,
                                 "SELF_COPY_ON_COMPLETION": 1},
                        "count": 3, "linked_count": 2}}
    k = probe.resolve_clone(probe.MECHS["cuda_graph_run"], fields)
    assert k["link"] == "schedule" and k["presend"] and not probe.sends_every_qmd(k)
    qs = []
    for i in range(3):
        q = QMDV04()
        q.set_common(sass_version=0x90)
        probe.shape_qmd(k, i, q, 0x1000 * (i + 2) if i < 2 else None, 0x8000)
        qs.append(q)
    assert [q.get("REQUIRE_SCHEDULING_PCAS") for q in qs] == [0, 1, 1]
    assert all(q.get("SELF_COPY_ON_COMPLETION") == 0 for q in qs)
    assert all(q.get("CONSTANT_BUFFER_PREFETCH", 5) == 0 for q in qs)
    plain = probe.resolve_clone(probe.MECHS["cuda_graph"], fields)
    q = QMDV04()
    probe.shape_qmd(plain, 0, q, 0x2000, 0x8000)
    assert q.get("REQUIRE_SCHEDULING_PCAS") == 1   # why the plain clone never started


def test_a_clone_without_a_link_keeps_a_fence(probe):
    fields = {"stream": {"linked": {"QMD_TYPE": 2}, "last": {"QMD_TYPE": 2}, "count": 6,
                         "linked_count": 0}}
    k = probe.resolve_clone(probe.MECHS["cuda_stream"], fields)
    assert k["fence"] == "wfi" and "link" not in k
    k = probe.resolve_clone(probe.MECHS["cuda_pdl_wait"], {"pdl_wait": fields["stream"]})
    assert k["fence"] == "none"
    with pytest.raises(KeyError):
        probe.resolve_clone(probe.MECHS["cuda_graph"], fields)


def test_a_clone_of_our_own_fields_runs_correctly_on_mock_nv(tmp_path):
    """The clone of this runtime's own graph QMDs (what the sniffer finds on mock-nv) is the
    runtime's graph link: the chain must come out right."""
    from runtime.drivers.nv.qmd import QMDV04 as Q
    q = Q()
    q.set_common(sass_version=0x90)
    q.prefetch_cbuf(0, 0x310)
    linked = {n: v for n, v in q.decode().items() if not n.startswith("SASS")}
    linked.update({"DEPENDENT_QMD_ENABLE(0)": 1, "DEPENDENT_QMD_PREFETCH(0)": 1,
                   "DEPENDENT_QMD_ACTION(0)": Q.value("DEPENDENT_QMD_ACTION_QMD_SCHEDULE")})
    last = {n: v for n, v in q.decode().items() if not n.startswith("SASS")}
    f = tmp_path / "fields.json"
    f.write_text(json.dumps({"graph": {"linked": linked, "last": last, "count": 4,
                                       "linked_count": 3}}))
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--child", "graph:cuda_graph", "--device", "mock-nv:0",
         "--n", "8", "--reps", "1", "--chain", "4", "--chain-replays", "2", "--chain-elements",
         "2048", "--child-timeout", "120", "--cuda-fields", str(f)],
        capture_output=True, text=True, timeout=150, cwd=ROOT)
    rows = [json.loads(ln[4:]) for ln in r.stdout.splitlines() if ln.startswith("JSON")]
    assert len(rows) == 2, r.stderr[-2000:]
    assert rows[0]["clone"]["link"] == "schedule"
    row = rows[1]
    assert row["inc_ok"] and row["chain_ok"] and row["host_chain_bad"] == 0


def test_cuda_graph_recipe_prefetches_the_successors_bank_and_orders_at_gpu_scope(probe):
    k = probe.MECHS["qmd_recipe"]
    qs = []
    for i in range(3):
        q = QMDV04()
        q.set_common(sass_version=0x90)
        q.set_cbuf(0, 0x10000 + 0x400 * i, 0x310)
        nxt = (0x10000 + 0x400 * (i + 1), 0x310) if i < 2 else None
        probe.shape_qmd(k, i, q, 0x1000 * (i + 2) if i < 2 else None, 0x8000, nxt)
        qs.append(q)
    l1, sysm = (QMDV04.value("CWD_MEMBAR_TYPE_" + v) for v in ("L1_MEMBAR", "L1_SYSMEMBAR"))
    assert [q.get("CWD_MEMBAR_TYPE") for q in qs] == [l1, l1, sysm]
    assert [probe.cbuf0_of(q)[0] for q in qs] == [0x10000, 0x10400, 0x10800]
    post = QMDV04.value("CONSTANT_BUFFER_PREFETCH_PREFETCH_POST")
    assert [q.get("CONSTANT_BUFFER_VALID", 5) for q in qs] == [1, 1, 0]
    assert [q.get("CONSTANT_BUFFER_PREFETCH", 5) for q in qs] == [post, post, 0]
    assert [(q.get("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", 5) << 6) for q in qs[:2]] == \
        [0x10400, 0x10800]
    # the grids a link starts keep the bank their predecessor prefetched
    assert [q.get("CONSTANT_BUFFER_INVALIDATE", 0) for q in qs] == [1, 0, 0]


def test_a_gate_is_a_null_grid_that_schedules_the_next_launch(probe):
    q = probe.null_qmd(QMDV04, 2, 0x4000)
    assert q.get("QMD_TYPE") == QMDV04.value("QMD_TYPE_GRID_NULL")
    assert q.get("DEPENDENCE_COUNTER") == 2 and q.get("SELF_COPY_ON_COMPLETION") == 1
    assert q.get("DEPENDENT_QMD_ACTION", 0) == QMDV04.value("DEPENDENT_QMD_ACTION_QMD_SCHEDULE")
    assert q.get("DEPENDENT_QMD0_POINTER") == 0x40
    assert probe.null_qmd(QMDV04, 1, None).get("DEPENDENT_QMD_ENABLE", 0) == 0
    assert probe.sends_every_qmd(probe.MECHS["gate1"])


def test_present_grids_are_loaded_ahead_and_started_by_their_links(probe):
    qs = _chain(probe, "qmd_presend")
    assert [q.get("REQUIRE_SCHEDULING_PCAS") for q in qs] == [0, 1, 1]
    assert [q.get("DEPENDENT_QMD_ENABLE", 0) for q in qs] == [1, 1, 0]
    assert not probe.sends_every_qmd(probe.MECHS["qmd_presend"])
    full = _chain(probe, "qmd_cuda_full")
    assert [q.get("SELF_COPY_ON_COMPLETION") for q in full] == [1, 1, 1]
    assert [q.get("CONSTANT_BUFFER_PREFETCH", 0) for q in full] == [0, 0, 0]


def test_cudas_pdl_chain_fires_links_at_pre_exit_and_pairs_latches(probe):
    qs = _chain(probe, "pdl_cuda", 4)
    assert [q.get("ENABLE_PROGRAM_PRE_EXIT") for q in qs] == [1, 1, 1, 0]
    assert [q.get("PRE_EXIT_AT_LAST_CTA_LAUNCH") for q in qs] == [0, 0, 0, 0]
    assert [q.get("ARRIVE_AT_LATCH_ID") for q in qs[:3]] == [1, 2, 3]
    assert [q.get("WAIT_ON_LATCH_VALID") for q in qs] == [0, 1, 1, 1]
    assert [q.get("WAIT_ON_LATCH_ID") for q in qs[1:]] == [1, 2, 3]
    assert [q.get("LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE") for q in qs] == [0, 1, 1, 1]
    assert [q.get("REQUIRE_SCHEDULING_PCAS") for q in qs] == [0, 1, 1, 1]
    assert [q.get("REQUIRE_SCHEDULING_PCAS") for q in _chain(probe, "pdl_cuda_nopresend")] == \
        [0, 0, 0]
    assert probe.MECHS["pdl_cuda_trigger"]["trigger"] and probe.MECHS["pdl_cuda"]["wait"]


def test_the_runtimes_early_start_encoding_with_kernels_that_trigger(probe):
    # the QMDs are those of pdl_cuda_nopresend (Launch(early_start=True)); only the kernel differs
    base, trig = (_chain(probe, m, 4) for m in ("pdl_cuda_nopresend",
                                                 "pdl_cuda_nopresend_trigger"))
    assert [q.data for q in base] == [q.data for q in trig]
    assert probe.MECHS["pdl_cuda_nopresend_trigger"]["trigger"]
    assert "griddepcontrol.launch_dependents" in probe.SRC_TRIGGER
    last = _chain(probe, "pdl_lastcta", 4)
    assert [q.get("PRE_EXIT_AT_LAST_CTA_LAUNCH") for q in last] == [1, 1, 1, 0]
    assert [q.get("ENABLE_PROGRAM_PRE_EXIT") for q in last] == [1, 1, 1, 0]
    assert [q.get("WAIT_ON_LATCH_ID") for q in last[1:]] == [1, 2, 3]
    assert not probe.MECHS["pdl_lastcta"].get("trigger")
