"""Facts in the committed AMD and NVIDIA bindings, cross-checked against gcc compiling the same
headers.

Each check is a C expression over the target's headers (compiled with the target's own include dirs,
preincludes and -D arguments) and the Python expression over the generated module that must equal
it. Where a target's pinned sources are not on this machine (NVIDIA's git sources in CI), the test
skips and says so; `bindgen check` then still verifies the fingerprint.
"""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bindgen.errors import SourceError
from bindgen.sources import Sources
from bindgen.spec import load_all

from .conftest import SPECS

GCC, GXX = shutil.which("gcc"), shutil.which("g++")
TARGETS = {t.name: t for t in load_all(SPECS)}


def _module(target: str):  # type: ignore[no-untyped-def]
    return importlib.import_module("hcq_bindings." + TARGETS[target].output[:-3].replace("/", "."))


def _probe(tmp: Path, target: str, checks: dict[str, str], cxx: bool = False) -> dict[str, int]:
    """Compiles and runs a program printing each C expression; returns label → value."""
    t = TARGETS[target]
    srcs = Sources()
    try:
        roots = {s.name: srcs.resolve(s).root for s in t.sources}
    except SourceError as e:
        pytest.skip(
            f"sources of {target} are not available here, so header facts are not checked: {e}"
        )
    compiler = GXX if cxx else GCC
    if compiler is None:
        pytest.skip("gcc/g++ is not installed")
    args = [f"-I{roots[i.source] / i.path}" for i in t.include_dirs]
    for p in t.preinclude:
        args += ["-include", str(roots[p.source] / p.path)]
    args += [a for a in t.clang_args if a.startswith(("-D", "-U"))]
    headers = []
    for h in t.headers:  # globs expand in name order, as bindgen.parse does
        headers += (
            sorted(roots[h.source].glob(h.path)) if "*" in h.path else [roots[h.source] / h.path]
        )
    lines = [f'#include "{p}"' for p in headers]
    lines += ["#include <stdio.h>", "int main(void) {"]
    for label, expr in checks.items():
        lines.append(f'  printf("%s %lld\\n", "{label}", (long long)({expr}));')
    lines += ["  return 0;", "}"]
    src = tmp / ("probe.cc" if cxx else "probe.c")
    src.write_text("\n".join(lines) + "\n")
    exe = tmp / "probe"
    std = "-std=gnu++17" if cxx else "-std=gnu11"
    r = subprocess.run(
        [compiler, std, "-w", *args, str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def _compare(got: dict[str, int], want: dict[str, int]) -> None:
    bad = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not bad, f"gcc vs generated (label: (gcc, python)): {bad}"
    assert len(want) >= 5


def test_pm4_packets_and_opcodes(tmp_path: Path) -> None:
    import ctypes

    pm4 = _module("pm4_gfx11")
    ops = [
        "PACKET3_SET_SH_REG",
        "PACKET3_DISPATCH_DIRECT",
        "PACKET3_RELEASE_MEM",
        "PACKET3_WAIT_REG_MEM",
        "PACKET3_ACQUIRE_MEM",
        "PACKET3_INDIRECT_BUFFER",
        "PACKET3_WRITE_DATA",
        "PACKET3_EVENT_WRITE",
        "PACKET3_SET_UCONFIG_REG",
    ]
    checks = {op: op for op in ops}
    for n in (1, 2, 8, 16):
        checks[f"SET_SH_REG_{n}"] = f"(unsigned)PACKET3(PACKET3_SET_SH_REG, {n})"
    checks["SH_REG_START"] = "PACKET3_SET_SH_REG_START"
    for rec in ("pm4_mec_release_mem", "pm4_mes_map_queues", "pm4_mes_runlist"):
        checks[f"sizeof_{rec}"] = f"sizeof(struct {rec})"
    got = _probe(tmp_path, "pm4_gfx11", checks)
    want = {op: getattr(pm4, op) for op in ops}
    want.update(
        {
            f"SET_SH_REG_{n}": pm4.PACKET3(pm4.PACKET3_SET_SH_REG, n) & 0xFFFFFFFF
            for n in (1, 2, 8, 16)
        }
    )
    want["SH_REG_START"] = pm4.PACKET3_SET_SH_REG_START
    want.update(
        {
            f"sizeof_{r}": ctypes.sizeof(getattr(pm4, r))
            for r in ("pm4_mec_release_mem", "pm4_mes_map_queues", "pm4_mes_runlist")
        }
    )
    _compare(got, want)


def test_sdma_packets_against_gcc_and_the_documented_sizes(tmp_path: Path) -> None:
    import ctypes

    sdma = _module("sdma_v6")
    # dword counts of the SDMA v6 packets: one past the last dword offset their field macros in
    # sdma_v6_0_0_pkt_open.h name
    documented = {
        "COPY_LINEAR": 7,
        "FENCE": 4,
        "TRAP": 2,
        "POLL_REGMEM": 6,
        "TIMESTAMP_GET": 3,
        "ATOMIC": 8,
        "GCR_REQ": 5,
    }
    for pkt, dwords in documented.items():
        assert ctypes.sizeof(getattr(sdma, f"SDMA_PKT_{pkt}")) == 4 * dwords, pkt
    names = [
        "SDMA_OP_COPY",
        "SDMA_OP_FENCE",
        "SDMA_OP_TRAP",
        "SDMA_OP_POLL_REGMEM",
        "SDMA_OP_TIMESTAMP",
        "SDMA_SUBOP_COPY_LINEAR",
        "SDMA_SUBOP_TIMESTAMP_GET_GLOBAL",
        "SDMA_PKT_COPY_LINEAR_COUNT_count_mask",
        "SDMA_PKT_POLL_REGMEM_HEADER_func_shift",
    ]
    checks = {n: n for n in names}
    checks["op_field"] = "SDMA_PKT_COPY_LINEAR_HEADER_OP(SDMA_OP_COPY)"
    checks["count_field"] = "SDMA_PKT_COPY_LINEAR_COUNT_COUNT(0x3fffff)"
    got = _probe(tmp_path, "sdma_v6", checks)
    want = {n: getattr(sdma, n) for n in names}
    want["op_field"] = sdma.SDMA_PKT_COPY_LINEAR_HEADER_OP(sdma.SDMA_OP_COPY)
    want["count_field"] = sdma.SDMA_PKT_COPY_LINEAR_COUNT_COUNT(0x3FFFFF)
    _compare(got, want)
    # The synthesised struct puts each field where the macros say.
    pkt = sdma.SDMA_PKT_COPY_LINEAR(op=sdma.SDMA_OP_COPY, count=0x1234)
    words = (ctypes.c_uint32 * 7).from_buffer_copy(pkt)
    assert words[0] & 0xFF == sdma.SDMA_OP_COPY
    assert words[1] == sdma.SDMA_PKT_COPY_LINEAR_COUNT_COUNT(0x1234)


def test_gc_registers(tmp_path: Path) -> None:
    gc = _module("gc_11_0_0")
    names = [
        "regCOMPUTE_PGM_LO",
        "regCOMPUTE_PGM_RSRC2",
        "regCOMPUTE_USER_DATA_0",
        "regCOMPUTE_NUM_THREAD_X",
        "regCOMPUTE_DISPATCH_INITIATOR",
        "regCOMPUTE_PGM_LO_BASE_IDX",
        "COMPUTE_PGM_RSRC2__LDS_SIZE_MASK",
        "COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT",
        "COMPUTE_PGM_RSRC1__VGPRS_MASK",
    ]
    _compare(
        _probe(tmp_path, "gc_11_0_0", {n: n for n in names}), {n: getattr(gc, n) for n in names}
    )


def test_amdhsa_kernel_descriptor_cxx(tmp_path: Path) -> None:
    import ctypes

    kd = _module("amdhsa")
    fields = [
        "group_segment_fixed_size",
        "kernarg_size",
        "kernel_code_entry_byte_offset",
        "compute_pgm_rsrc3",
        "compute_pgm_rsrc1",
        "compute_pgm_rsrc2",
        "kernel_code_properties",
    ]
    checks = {f"off_{f}": f"offsetof(llvm::amdhsa::kernel_descriptor_t, {f})" for f in fields}
    checks["size"] = "sizeof(llvm::amdhsa::kernel_descriptor_t)"
    for e in (
        "COMPUTE_PGM_RSRC2_USER_SGPR_COUNT_SHIFT",
        "KERNEL_CODE_PROPERTY_ENABLE_WAVEFRONT_SIZE32",
        "COMPUTE_PGM_RSRC1_GRANULATED_WORKITEM_VGPR_COUNT",
    ):
        checks[e] = f"llvm::amdhsa::{e}"
    got = _probe(tmp_path, "amdhsa", checks, cxx=True)
    want = {f"off_{f}": getattr(kd.kernel_descriptor_t, f).offset for f in fields}
    want["size"] = ctypes.sizeof(kd.kernel_descriptor_t)
    want.update({e: getattr(kd, e) for e in checks if not e.startswith(("off_", "size"))})
    _compare(got, want)


def test_nv_rm_params_classes_controls(tmp_path: Path) -> None:
    import ctypes

    rm = _module("rm_580")
    structs = [
        "NVOS21_PARAMETERS",
        "NVOS54_PARAMETERS",
        "NVOS64_PARAMETERS",
        "NVOS46_PARAMETERS",
        "NVOS33_PARAMETERS",
        "NV_VASPACE_ALLOCATION_PARAMETERS",
        "NV_CHANNEL_ALLOC_PARAMS",
        "UVM_INITIALIZE_PARAMS",
        "UVM_REGISTER_GPU_PARAMS",
        "UVM_MAP_EXTERNAL_ALLOCATION_PARAMS",
        "NV0080_CTRL_GPU_GET_CLASSLIST_PARAMS",
        "NV2080_CTRL_GPU_GET_GID_INFO_PARAMS",
        "NvNotification",
    ]
    consts = [
        "NV01_ROOT_CLIENT",
        "NV01_DEVICE_0",
        "NV20_SUBDEVICE_0",
        "FERMI_VASPACE_A",
        "KEPLER_CHANNEL_GROUP_A",
        "HOPPER_CHANNEL_GPFIFO_A",
        "HOPPER_COMPUTE_A",
        "HOPPER_DMA_COPY_A",
        "HOPPER_USERMODE_A",
        "AMPERE_COMPUTE_A",
        "NV_ESC_RM_ALLOC",
        "NV_ESC_RM_CONTROL",
        "NV_ESC_RM_MAP_MEMORY",
        "UVM_INITIALIZE",
        "UVM_REGISTER_GPU",
        "NV0080_CTRL_CMD_GPU_GET_CLASSLIST",
        "NV2080_CTRL_CMD_GPU_GET_GID_INFO",
        "NVC36F_CTRL_CMD_GPFIFO_GET_WORK_SUBMIT_TOKEN",
        "NVA06C_CTRL_CMD_GPFIFO_SCHEDULE",
        "NV_ERR_INVALID_ARGUMENT",
        "NVC361_NOTIFY_CHANNEL_PENDING",
    ]
    checks = {f"sizeof_{s}": f"sizeof({s})" for s in structs}
    checks.update({c: c for c in consts})
    got = _probe(tmp_path, "rm_580", checks)
    want = {f"sizeof_{s}": ctypes.sizeof(getattr(rm, s)) for s in structs}
    want.update({c: getattr(rm, c) for c in consts})
    _compare(got, want)
    codes = {name: code for name, code, _ in rm.NV_STATUS_CODE_TABLE}
    assert codes["NV_ERR_INVALID_ARGUMENT"] == rm.NV_ERR_INVALID_ARGUMENT


def test_nv_qmd_bit_ranges(tmp_path: Path) -> None:
    cl = _module("classes")
    fields = []
    for ver in ("NVC6C0_QMDV03_00", "NVCBC0_QMDV04_00", "NVCEC0_QMDV05_00"):
        fields += [
            n for n in dir(cl) if n.startswith(ver + "_") and isinstance(getattr(cl, n), tuple)
        ]
    assert len(fields) > 300
    sample = fields[::7]
    # MW(hi:lo) is not C; `(1 ? hi:lo)` and `(0 ? hi:lo)` are, and pick hi and lo (DRF style).
    checks = {}
    for n in sample:
        checks[f"{n}.hi"] = f"(1 ? {n})"
        checks[f"{n}.lo"] = f"(0 ? {n})"
    idx = "NVCBC0_QMDV04_00_CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6"
    checks[f"{idx}(3).hi"] = f"(1 ? {idx}(3))"
    checks[f"{idx}(3).lo"] = f"(0 ? {idx}(3))"
    t = TARGETS["classes"]
    # the probe needs MW(x) to be x, as the generator's range rule reads it
    old = t.clang_args
    object.__setattr__(t, "clang_args", old + ("-DMW(x)=x",))
    try:
        got = _probe(tmp_path, "classes", checks)
    finally:
        object.__setattr__(t, "clang_args", old)
    want = {}
    for n in sample:
        want[f"{n}.hi"], want[f"{n}.lo"] = getattr(cl, n)
    want[f"{idx}(3).hi"], want[f"{idx}(3).lo"] = getattr(cl, idx)(3)
    _compare(got, want)
    assert cl.NVCBC0_QMDV04_00_PROGRAM_ADDRESS_LOWER == (1247, 1216)  # byte 0x98, unshifted
    assert re.match(r"NVC", idx)


@pytest.mark.parametrize("target", ["rm_580", "classes"])
def test_every_nv_bit_range_macro_is_a_tuple(target: str) -> None:
    """Every `hi:lo` / `MW(hi:lo)` macro of the kept headers is a (hi, lo) tuple (or, when indexed,
    a function returning one): none dropped, none left as text."""
    from bindgen.parse import parse_target
    from bindgen.passes.select import kept_macros
    t = TARGETS[target]
    srcs = Sources()
    try:
        roots = {s.name: srcs.resolve(s).root for s in t.sources}
    except SourceError as e:
        pytest.skip(f"sources of {target} are not available here: {e}")
    pr = parse_target(t, roots)
    kept = kept_macros(t, pr.macros)
    mod = _module(target)
    ranges = re.compile(r"(MW\s*\(\s*)?\(?[\w()+*\s-]+\)?\s*:\s*\(?[\w()+*\s-]+\)?\s*\)?")
    seen, wrong = 0, []
    for md in pr.macros:
        body = " ".join(md.body)
        if md.name not in kept or ":" not in body or "?" in body:
            continue
        if ranges.fullmatch(body):
            seen += 1
            value = getattr(mod, md.name, None)
            if md.params is not None:
                value = value(*range(len(md.params))) if callable(value) else None
            if not (isinstance(value, tuple) and len(value) == 2):
                wrong.append(md.name)
    assert seen > 500 and not wrong, (seen, wrong[:10])
