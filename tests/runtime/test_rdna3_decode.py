"""The decoder against LLVM, the code-object parser against the reference data, msgpack, compiler.

Oracle: for every instruction of every test kernel (ours, compiled here, and the prebuilt
references) our decoder must agree with `llvm-objdump-16 -d --mcpu=gfx1100` on the address, the
length and the full text (mnemonic and operands).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from runtime.drivers.amd import elf
from runtime.drivers.amd.compiler import AMDCompiler, CompileError
from runtime.drivers.mock.rdna3.decode import decode_all, decode_one

from .rdna3_util import (REFERENCE_NAMES, REFERENCE_KERNELS, compiled, needs_compiler,
                         needs_objdump, our_kernel_names, reference)

_LINE = re.compile(r"^\s+(\S.*?)\s*// ([0-9A-F]{12}): ((?:[0-9A-F]{8} ?)+)")


def objdump(code: bytes, tmp_path) -> dict[int, tuple[str, int]]:
    """address → (text, length in bytes) as llvm-objdump-16 prints them."""
    path = tmp_path / "k.hsaco"
    path.write_bytes(code)
    out = subprocess.run(["llvm-objdump-16", "-d", "--mcpu=gfx1100", str(path)],
                         capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        m = _LINE.match(line)
        if m:
            res[int(m.group(2), 16)] = (" ".join(m.group(1).split()), 4 * len(m.group(3).split()))
    return res


def _check_against_objdump(code: bytes, tmp_path) -> int:
    co = elf.parse(code)
    text = co.section(".text")
    insts = decode_all(co.section_bytes(".text"), text.addr)
    ref = objdump(code, tmp_path)
    assert insts, "nothing decoded"
    for inst in insts:
        assert inst.addr in ref, f"{inst.addr:#x}: LLVM has no instruction here ({inst})"
        want_text, want_len = ref[inst.addr]
        assert inst.size == want_len, f"{inst.addr:#x}: {inst} is {inst.size} B, LLVM {want_len}"
        assert " ".join(str(inst).split()) == want_text, f"{inst.addr:#x}"
    # Everything up to the s_code_end padding was decoded.
    last = max(a for a, (t, _) in ref.items() if t != "s_code_end")
    assert insts[-1].addr == last
    return len(insts)


@needs_objdump
@needs_compiler
@pytest.mark.parametrize("name", our_kernel_names())
def test_decoder_matches_objdump_on_our_kernels(name, tmp_path):
    assert _check_against_objdump(compiled(name), tmp_path) > 10


@needs_objdump
@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_decoder_matches_objdump_on_reference_kernels(name, tmp_path):
    assert _check_against_objdump(reference(name), tmp_path) > 10


@pytest.mark.skipif(shutil.which("llvm-mc-16") is None, reason="llvm-mc-16 not installed")
def test_opcode_tables_match_llvm():
    """opcodes.py is exactly what tools/rdna3_gen_opcodes.py derives from llvm-mc-16's
    disassembler."""
    res = subprocess.run([sys.executable, "-m", "tools.rdna3_gen_opcodes",
                          "--check"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


# every quad-permute, named bit-mask (SWAP, REVERSE, BROADCAST) and plain BITMASK_PERM form, and
# the FFT/rotate encodings LLVM prints as numbers
SWIZZLE_OFFSETS = [0x041F, 0x801B, 0x8000, 0x80E4, 0x001F, 0x0C1F, 0x7C1F, 0x003C, 0x0038, 0x0021,
                   0x1234, 0x7FFF, 0x0001, 0x03E0, 0x9000, 0xC000, 0xE000, 0xFFFF, 0x5555]


@pytest.mark.skipif(shutil.which("llvm-mc-16") is None, reason="llvm-mc-16 not installed")
def test_ds_swizzle_offsets_print_as_llvm_does():
    asm = "\n".join(f"ds_swizzle_b32 v1, v2 offset:{o}" for o in SWIZZLE_OFFSETS)
    res = subprocess.run(["llvm-mc-16", "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"],
                         input=asm, capture_output=True, text=True, check=True)
    lines = [ln for ln in res.stdout.splitlines() if "ds_swizzle_b32" in ln]
    assert len(lines) == len(SWIZZLE_OFFSETS)
    for off, line in zip(SWIZZLE_OFFSETS, lines):
        words = [int(b, 16) for b in re.findall(r"0x([0-9a-f]{2})", line.split("encoding:")[1])]
        inst = decode_one(bytes(words), 0, 0)
        assert " ".join(str(inst).split()) == " ".join(line.split(";")[0].split()), hex(off)


def test_decode_literal_and_vopd_fields():
    # v_mul_f32_e32 v17, 0x42c80000, v5 (VOP2 with a literal) and a VOPD pair.
    words = [0x10220AFF, 0x42C80000, 0xC8C60207, 0x01000007]
    code = b"".join(w.to_bytes(4, "little") for w in words)
    a = decode_one(code, 0, 0x100)
    assert (a.enc, a.name, a.size, a.literal) == ("VOP2", "v_mul_f32", 8, 0x42C80000)
    b = decode_one(code, 8, 0x108)
    assert (b.enc, b.name, b.name_y, b.size) == ("VOPD", "v_dual_mul_f32", "v_dual_mul_f32", 8)
    assert (b.f["vdstx"], b.f["vdsty"]) == (1, 0)
    assert str(b) == "v_dual_mul_f32 v1, s7, v1 :: v_dual_mul_f32 v0, s7, v0"


def test_unknown_opcode_decodes_with_a_name():
    inst = decode_one((0).to_bytes(4, "little"), 0, 0x40)  # VOP2 opcode 0 does not exist
    assert inst.name == "<VOP2 op 0>" and inst.size == 4


# -- code objects ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_elf_matches_reference_json(name):
    co = elf.parse(reference(name))
    ref = json.loads((REFERENCE_KERNELS / f"{name}.kd_and_metadata.json").read_text())
    assert co.metadata == ref["metadata"]
    for kname, want in ref["kernels"].items():
        k = co.kernels[kname]
        kd = k.kd
        assert kd.group_segment_fixed_size == want["group_segment_fixed_size"]
        assert kd.kernarg_size == want["kernarg_size"]
        assert kd.kernel_code_entry_byte_offset == want["kernel_code_entry_byte_offset"]
        assert hex(kd.rsrc1) == want["compute_pgm_rsrc1"]
        assert hex(kd.rsrc2) == want["compute_pgm_rsrc2"]
        assert hex(kd.kernel_code_properties) == want["kernel_code_properties"]
        assert hex(k.kd_vaddr) == want["kd_vaddr"] and hex(k.entry_vaddr) == want["code_vaddr"]
        assert kd.user_sgpr_count == want["rsrc2"]["user_sgpr_count"]
        assert k.code_object_v5 == (name == "vector_add_cov5")
    image = co.image()
    text = co.section(".text")
    assert image[text.addr:text.addr + text.size] == co.section_bytes(".text")


def test_user_sgpr_layout_follows_kernel_code_properties():
    v4 = elf.parse(reference("vector_add")).kernels["vector_add"].kd
    v5 = elf.parse(reference("vector_add_cov5")).kernels["vector_add"].kd
    assert v4.user_sgpr_layout() == {"dispatch_ptr": 0, "kernarg_segment_ptr": 2}
    assert v5.user_sgpr_layout() == {"kernarg_segment_ptr": 0}
    assert v4.vgpr_count == 8 and v4.wave32


def test_elf_errors_name_the_problem():
    with pytest.raises(elf.ElfError, match="magic"):
        elf.parse(b"not an elf at all" * 8)


def test_msgpack_decoder():
    blob = bytes([0x83, 0xA1, 0x61, 0x01, 0xA1, 0x62, 0x92, 0xC3, 0xC0, 0xA1, 0x63, 0xCB]) + \
        bytes.fromhex("3FF8000000000000")  # {"a": 1, "b": [true, nil], "c": 1.5 (float 64)}
    assert elf.msgpack_unpack(blob) == {"a": 1, "b": [True, None], "c": 1.5}
    assert elf.msgpack_unpack(bytes([0xD1, 0xFF, 0x38])) == -200
    assert elf.msgpack_unpack(bytes([0xDC, 0x00, 0x02, 0xFF, 0x7F])) == [-1, 127]
    with pytest.raises(elf.ElfError):
        elf.msgpack_unpack(bytes([0x92, 0x01]))


# -- the compiler front ------------------------------------------------------------------------
@needs_compiler
def test_compile_error_carries_compiler_messages():
    with pytest.raises(CompileError) as e:
        AMDCompiler().compile("__kernel void k(__global int *a) { a[0] = undeclared; }")
    assert "undeclared" in e.value.log and "kernel.cl:1" in e.value.log
    assert "/tmp" not in e.value.log


@needs_compiler
def test_compiler_output_is_an_amdhsa_code_object():
    co = elf.parse(compiled("vadd_f32"))
    assert co.metadata["amdhsa.target"] == "amdgcn-amd-amdhsa--gfx1100"
    k = co.kernels["vadd_f32"]
    assert k.kd.wave32 and k.kd.rsrc1 >> 6 & 0xF == 2  # what LLVM 16 writes there
    v5 = elf.parse(AMDCompiler(code_object_version=5).compile(
        (REFERENCE_KERNELS / "vector_add.cl").read_text()))
    assert v5.metadata["amdhsa.version"] == [1, 2]
