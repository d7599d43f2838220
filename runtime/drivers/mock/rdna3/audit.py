"""Static audit: which instructions of a code object the RDNA3 interpreter cannot execute.

    python -m runtime.drivers.mock.rdna3.audit CODE_OBJECT [CODE_OBJECT ...]

Decodes every function of the code object, kernels and the functions they call, over the range
its ELF symbol gives (start and size; where a symbol has no size, up to the next function or the
end of its section), and prepares each instruction the way the interpreter does before its
first execution, without running anything. Each instruction is charged to the function that
holds it, so a helper placed before a kernel is audited too and one kernel's code is never
counted against another. Functions that are not kernels are audited in the wave size of the
kernels that may call them (both, if the code object has kernels of both).

Prints the number of unsupported instructions of each file and each one as
FUNCTION+OFFSET (ADDRESS): INSTRUCTION [REASON]. Exit status: 0 when none was found, 1 when some
were, 2 when a file could not be read or is not an AMDHSA code object (with a message naming
the file; the other files are still audited).

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

    function: str      # the kernel or function whose code holds it
    offset: int        # from the function's start
    address: int       # ELF virtual address
    text: str
    reason: str


@dataclass(frozen=True)
class Function:
    """A function's code in the loaded image: [start, end) and the wave sizes it runs in."""

    name: str
    start: int
    end: int
    wave64: tuple[bool, ...]


def functions(co: elf.CodeObject) -> list[Function]:
    """The kernels and other functions of a code object, by address."""
    kernel_at = {k.entry_vaddr: k for k in co.kernels.values()}
    modes = tuple(sorted({not k.kd.wave32 for k in co.kernels.values()})) or (False,)
    starts: dict[int, tuple[str, int, int]] = {}   # address: (name, symbol size, shndx)
    for sym in co.symbols.values():
        if sym.is_function and 0 < sym.shndx < len(co.sections):
            starts.setdefault(sym.value, (sym.name, sym.size, sym.shndx))
    text = next((i for i, sec in enumerate(co.sections) if sec.name == ".text"), 0)
    for addr, kern in kernel_at.items():    # a kernel entry without a function symbol
        starts.setdefault(addr, (kern.name, 0, text))
    ordered = sorted(starts)
    out = []
    for i, addr in enumerate(ordered):
        name, size, shndx = starts[addr]
        sec = co.sections[shndx] if 0 < shndx < len(co.sections) else None
        limit = sec.addr + sec.size if sec is not None and sec.addr <= addr else co.image_size
        if i + 1 < len(ordered):
            limit = min(limit, ordered[i + 1])
        end = min(addr + size, limit) if size else limit
        kernel = kernel_at.get(addr)
        wave64 = (not kernel.kd.wave32,) if kernel is not None else modes
        if end > addr:
            out.append(Function(name, addr, end, wave64))
    return out


def audit(code_object: bytes) -> list[Unsupported]:
    """Every unsupported instruction of every function of `code_object` (raises elf.ElfError
    for a file that is not one)."""
    co = elf.parse(code_object)
    image = co.image()
    out: list[Unsupported] = []
    for fn in functions(co):
        seen: set[int] = set()
        for wave64 in fn.wave64:
            prog = decode_program(image[fn.start:fn.end], fn.start)
            prog.wave64 = wave64
            for i, inst in enumerate(prog.insts):
                if inst.addr in seen:
                    continue
                try:
                    prog.step(i)
                    reason = kfd_queue_fault(inst)
                except KernelFault as e:
                    reason = str(e).split(f" at {inst.addr:#x}")[0]
                if reason is not None:
                    seen.add(inst.addr)
                    if len(fn.wave64) > 1:
                        reason += f" (in a wave{64 if wave64 else 32} kernel)"
                    out.append(Unsupported(fn.name, inst.addr - fn.start, inst.addr, str(inst),
                                           reason))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.drivers.mock.rdna3.audit",
                                 description="List the instructions of AMDHSA code objects that "
                                 "the mock GPU's RDNA3 interpreter cannot execute (exit 0: none, "
                                 "1: some found, 2: a file could not be audited).")
    ap.add_argument("code_objects", nargs="+", type=Path, metavar="CODE_OBJECT")
    args = ap.parse_args(argv)
    total, status = 0, 0
    for path in args.code_objects:
        try:
            found = audit(path.read_bytes())
        except OSError as e:
            print(f"{path}: cannot audit: cannot read it: {e.strerror or e}", file=sys.stderr)
            status = 2
            continue
        except elf.ElfError as e:
            print(f"{path}: cannot audit: not an AMDHSA code object: {e}", file=sys.stderr)
            status = 2
            continue
        total += len(found)
        print(f"{path}: {len(found)} unsupported instruction(s)")
        for u in found:
            print(f"  {u.function}+{u.offset:#x} ({u.address:#x}): {u.text}  [{u.reason}]")
    if status:
        return status
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
