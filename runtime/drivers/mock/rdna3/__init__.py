"""RDNA3 (gfx1100) interpreter for the mock AMD GPU.

The PM4 processor decodes SET_SH_REG state and DISPATCH_DIRECT into a `DispatchRecord` and calls
`execute(dispatch, mem)`, which fetches the code at `pgm_addr` from `mem`, runs every wave of the
dispatch, and returns `ExecStats`. Faults (unknown instructions, memory faults, bad state) raise
`KernelFault` naming the instruction and its address.

Modules: `decode` (binary formats, `opcodes` tables generated from LLVM), `disasm` (LLVM-syntax
text), `interp` (the scheduler), `machine` (register files, wave groups), `ops_salu`,
`ops_valu`/`valu_table`, `ops_mem`/`atomics` (instruction semantics), `fp` (float helpers),
`loader_for_tests` (what the AMD driver does before a dispatch, for tests without the driver).
"""
from .errors import DispatchRecord, ExecStats, KernelFault, PageFaultError
from .interp import ProgramCache, execute

__all__ = ["DispatchRecord", "ExecStats", "KernelFault", "PageFaultError", "ProgramCache",
           "execute"]
