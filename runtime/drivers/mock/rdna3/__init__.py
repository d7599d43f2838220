"""RDNA3 (gfx1100) interpreter for the mock AMD GPU.

The PM4 processor decodes SET_SH_REG state and DISPATCH_DIRECT into a `DispatchRecord` and calls
`execute(dispatch, mem)` (or, resumable in time slices, `Dispatch(dispatch, mem).advance(s)`), which fetches the code at `pgm_addr` from `mem`, runs every wave of the
dispatch, and returns `ExecStats`. Faults (unknown or unsupported instructions, memory faults,
bad state) raise `KernelFault` naming the instruction and its address; memory faults raise its
subclass `PageFaultError`, whose `cause` is the MockMemory `PageFault`.

How it runs (interp.py): the waves of a batch of workgroups execute in lock step, one numpy
operation per instruction over all lanes of all waves at the same program counter (VGPRs are
[waves, 32] planes, SGPRs/SCC per-wave vectors, EXEC a [waves, 32] mask). Waves that branch
differently split into groups, groups meet again at the lowest pending program counter, and
barriers are where waiting groups are released together.

Modules: `decode` (binary formats; `opcodes` tables generated from LLVM by `gen_opcodes`),
`disasm` (LLVM-syntax text, checked against llvm-objdump-16), `optypes` (operand types from
mnemonics), `interp` (programs, batches, the scheduler), `machine` (register files, wave groups),
`operands` (typed operand access), `ops_salu`, `ops_valu`/`valu_table`, `ops_vop3p` (packed
math, dot products, WMMA), `dpp` (DPP16/DPP8 lane patterns), `ops_xlane` (readlane/writelane,
permlane16/x16, M0-relative moves), `ops_mem`/`ops_ds`/
`mem_lanes`/`atomics` (instruction semantics), `fp` (IEEE helpers: fused multiply-add, the
division helpers), `liveness` (dead lane-mask results, EXEC-masked blocks),
`loader_for_tests` (what the AMD driver does before a dispatch, for tests without the driver),
`opcode_coverage` (acceptance over LLVM's gfx1100 opcode tables, a development tool).

Not implemented (each raises KernelFault when executed): image/buffer
(MUBUF/MTBUF/MIMG) memory access except the cache invalidations, GDS, FLAT accesses to the LDS
or private apertures, s_trap handlers, rounding modes other than round-to-nearest-even. FP32
denormals are always kept (the FLOAT_MODE clang-16 emits); s_denorm_mode/s_setreg are ignored.
"""
from .errors import DispatchRecord, ExecStats, KernelFault, PageFaultError
from .interp import Dispatch, ProgramCache, execute

__all__ = ["Dispatch", "DispatchRecord", "ExecStats", "KernelFault", "PageFaultError",
           "ProgramCache", "execute"]
