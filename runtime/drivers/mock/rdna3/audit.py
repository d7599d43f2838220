"""Static audit: which instructions of a code object the RDNA3 interpreter cannot execute.

    python -m runtime.drivers.mock.rdna3.audit CODE_OBJECT [CODE_OBJECT ...]

Decodes every kernel from its entry point (as a dispatch would) and prepares each instruction
the way the interpreter does before its first execution, without running anything. Prints the
number of unsupported instructions and each one with its kernel, offset and the reason; exits 0
only when there are none (1 otherwise, 2 for a file that is not an AMDHSA code object).

It also lists the DS instructions with the GDS bit, which fault on every queue a gfx11 KFD makes
(no GDS, no GWS range: `ops_gds`). What it cannot see: refusals that depend on run-time values
(a swizzled buffer descriptor, a FLAT atomic on the private aperture, a memory fault) are
reported by the launch itself.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from runtime.drivers.amd import elf

from .errors import KernelFault
from .interp import decode_program
from .ops_gds import kfd_queue_fault


@dataclass(frozen=True)
class Unsupported:
    """One instruction the interpreter refuses: where it is and why."""

    kernel: str
    offset: int        # from the kernel's entry
    address: int       # ELF virtual address
    text: str
    reason: str


def audit(code_object: bytes) -> list[Unsupported]:
    """Every unsupported instruction of every kernel of `code_object` (raises elf.ElfError for
    a file that is not one)."""
    co = elf.parse(code_object)
    image = co.image()
    out: list[Unsupported] = []
    for name in sorted(co.kernels):
        k = co.kernels[name]
        prog = decode_program(image[k.entry_vaddr:], k.entry_vaddr)
        prog.wave64 = not k.kd.wave32
        for i, inst in enumerate(prog.insts):
            try:
                prog.step(i)
                reason = kfd_queue_fault(inst)
            except KernelFault as e:
                reason = str(e).split(f" at {inst.addr:#x}")[0]
            if reason is not None:
                out.append(Unsupported(name, inst.addr - k.entry_vaddr, inst.addr, str(inst),
                                       reason))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.drivers.mock.rdna3.audit",
                                 description="List the instructions of AMDHSA code objects that "
                                 "the mock GPU's RDNA3 interpreter cannot execute.")
    ap.add_argument("code_objects", nargs="+", type=Path, metavar="CODE_OBJECT")
    args = ap.parse_args(argv)
    total, status = 0, 0
    for path in args.code_objects:
        try:
            found = audit(path.read_bytes())
        except (OSError, elf.ElfError) as e:
            print(f"{path}: cannot audit: {e}", file=sys.stderr)
            status = 2
            continue
        total += len(found)
        print(f"{path}: {len(found)} unsupported instruction(s)")
        for u in found:
            print(f"  {u.kernel}+{u.offset:#x} ({u.address:#x}): {u.text}  [{u.reason}]")
    if status:
        return status
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
