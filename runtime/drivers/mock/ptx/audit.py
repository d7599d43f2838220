"""Static audit: which instructions of a PTX module the mock NVIDIA GPU's interpreter cannot run.

    python -m runtime.drivers.mock.ptx.audit MODULE.ptx [MODULE.ptx ...]

Parses every kernel of each module and prepares each instruction the way a launch does, without
running anything. Prints the number of unsupported instructions and each one with its kernel,
PTX line and the reason; exits 0 only when there are none (1 otherwise, 2 for a file that cannot
be read as PTX). What it cannot see: faults that depend on run-time values (an address outside
every mapping, a misaligned vector access, a barrier reached by part of a warp) are reported by
the launch itself.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from runtime.drivers.mock.ptx.execute import Kernel
from runtime.drivers.mock.ptx.parse import PtxSyntaxError, parse_body
from runtime.drivers.nv.ptx import parse_module
from runtime.hcq.errors import ProgramError


@dataclass(frozen=True)
class Unsupported:
    """One instruction the interpreter refuses: where it is and why."""

    kernel: str
    line: int
    text: str
    reason: str


def audit(text: str) -> tuple[list[Unsupported], int]:
    """Every unsupported instruction of every kernel of the module `text`, and the number of
    instructions audited. Raises `ProgramError` or `PtxSyntaxError` for text that is not a PTX
    module it can read."""
    mod = parse_module(text)
    out: list[Unsupported] = []
    count = 0
    for name in sorted(mod.entries):
        k = Kernel(mod, parse_body(mod, name))
        count += len(k.instrs)
        out += [Unsupported(name, ins.line, ins.text, reason) for ins, reason in k.unsupported]
    return out, count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.drivers.mock.ptx.audit",
                                 description="List the instructions of PTX modules that the mock "
                                 "NVIDIA GPU's PTX interpreter cannot execute.")
    ap.add_argument("modules", nargs="+", type=Path, metavar="MODULE")
    args = ap.parse_args(argv)
    total, status = 0, 0
    for path in args.modules:
        try:
            found, count = audit(path.read_bytes().rstrip(b"\0").decode())
        except (OSError, UnicodeDecodeError, ProgramError, PtxSyntaxError) as e:
            print(f"{path}: cannot audit: {e}", file=sys.stderr)
            status = 2
            continue
        total += len(found)
        print(f"{path}: {count} instructions, {len(found)} unsupported")
        for u in found:
            print(f"  {u.kernel} line {u.line}: {u.text}  [{u.reason}]")
    if status:
        return status
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
