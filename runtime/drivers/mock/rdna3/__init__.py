"""RDNA3 (gfx1100) interpreter for the mock AMD GPU.

The PM4 processor decodes SET_SH_REG state and DISPATCH_DIRECT into a `DispatchRecord` and runs
it as a `Dispatch` in time slices (`advance(seconds)`; `describe()` tells where each wave is), so
a kernel that never ends does not hang the host; `execute(dispatch, mem)` runs one to the end.
Either fetches the code at `pgm_addr` from `mem`, runs every wave and returns `ExecStats`. Faults
(unknown or unsupported instructions, memory faults, bad state) raise `KernelFault` naming the
instruction and its address; memory faults raise its subclass `PageFaultError`, whose `cause` is
the MockMemory `PageFault`. `python -m runtime.drivers.mock.rdna3.audit CODE_OBJECT` lists, without
running, every instruction of a code object the interpreter would refuse, charged to the
function that holds it (exit 0: none, 1: some, 2: a file that cannot be audited).

How it runs (interp.py): the waves of a batch of workgroups execute in lock step, one numpy
operation per instruction over all lanes of all waves at the same program counter (VGPRs are
[waves, 32] planes, SGPRs/SCC per-wave vectors, EXEC a [waves, 32] mask). Waves that branch
differently split into wave sets, wave sets meet again at the lowest pending program counter, and
barriers are where waiting wave sets are released together. Where lanes of several waves race on one
address in a returning compare-and-swap (a float atomic add's retry loop), the waves go on one
after another, one of the orders the hardware may pick: the wave set splits into single waves once,
the first runs on and each of the others continues when nothing else can run, which keeps such
loops linear in the number of lanes.

Modules: `decode` (binary formats; `opcodes` tables generated from LLVM by the developer tool
tools/rdna3_gen_opcodes.py, which also checks them),
`disasm` (LLVM-syntax text, checked against llvm-objdump-16), `optypes` (operand types from
mnemonics), `interp` (programs, batches, the scheduler), `machine` (register files, wave sets),
`operands` (typed operand access), `ops_salu`, `ops_valu`/`valu_table`, `ops_vop3p` (packed
math, dot products, WMMA), `dpp` (DPP16/DPP8 lane patterns), `ops_xlane` (readlane/writelane,
permlane16/x16, M0-relative moves), `ops_mem`/`ops_ds`/`ops_gds`/`ops_buffer` (MUBUF through V#
descriptors)/`ops_buffer_format` (format-converting MUBUF and MTBUF, loads into LDS;
`buffer_formats` holds the data formats)/`mem_lanes`/`atomics` (instruction semantics),
`gws` (the global wave sync unit), `ops_wave64`, `fp` (IEEE helpers: fused multiply-add, the
division helpers), `liveness` (dead lane-mask results, EXEC-masked blocks), `audit` (the
static check of a code object). tools/rdna3_opcode_coverage.py measures acceptance over LLVM's
gfx1100 opcode tables (a developer tool, not shipped).

Memory: GLOBAL/FLAT/SCRATCH/DS loads, stores and atomics in every width including the d16 and
d16_hi forms; FLAT addresses in the shared and private apertures go to LDS and scratch; MUBUF
with the V#'s base, stride, NUM_RECORDS and OOB_SELECT range checks (out-of-range loads return 0,
stores and atomics are dropped; a V# with FORMAT 0 is unbound); the format-converting
buffer_*_format_* (the V#'s FORMAT and DST_SEL) and MTBUF tbuffer_* (the instruction's format)
with their d16/d16_hi forms; the MUBUF loads into LDS (M0-based LDS address);
ds_condxchg32_rtn_b64, the ray-tracing stack ds_bvh_stack_rtn_b32 and the clamping
buffer/global_atomic_csub_u32. Scratch lives in the dispatch's private segment memory
(COMPUTE_DISPATCH_SCRATCH_BASE, TMPRING_SIZE: one slot per running wave, dwords interleaved
across the wave's lanes).

wave64 kernels (-mwavefrontsize64, DISPATCH_INITIATOR.CS_W32_EN clear) run as two 32-lane rows
per wave, the way the hardware issues a wave64's VALU work: the SGPRs are the wave's, lane masks
(EXEC, VCC, a compare's SGPR pair) keep lanes 0-31 in the low SGPR and 32-63 in the high one,
EXEC/VCC tests look at both; readlane, readfirstlane, writelane, mbcnt, permlane64 and
ds_bpermute/ds_permute have wave64 forms (`ops_wave64`), ds_append/ds_consume count the active
lanes of both rows, and ds_swizzle's modes stay within a 32-lane half, as a row does. The other
instructions that address lanes across the two halves (addtid, movrel) are refused in wave64
kernels.

Code is decoded from the entry point to the first s_code_end; a call or jump to an address
outside it (a function the linker placed before the kernel) decodes the code there on first use.

DS instructions with the GDS bit (`ops_gds`) behave as on a gfx11 KFD compute queue, which has
no GDS memory, ordered-append counters or GWS range: GDS accesses, ds_ordered_count and the GS
register adds fault naming the instruction, a ds_gws_* op names its resource id (the hardware
would NACK and halt the wave). With a GWS range in the record (`DispatchRecord.gws`) the GWS
semaphores and barriers run as the ISA describes (`gws`): queued waves wait in the scheduler and
a wait no running wave can end faults instead of hanging.

Not implemented (each raises KernelFault naming it): swizzled buffers and TFE, MIMG,
s_trap handlers, rounding modes other than round-to-nearest-even.
FP32 denormals are always kept (the FLOAT_MODE clang-16 emits); s_denorm_mode/s_setreg are
ignored.
"""
from .errors import DispatchRecord, ExecStats, KernelFault, PageFaultError
from .interp import Dispatch, ProgramCache, execute

__all__ = ["Dispatch", "DispatchRecord", "ExecStats", "KernelFault", "PageFaultError",
           "ProgramCache", "execute"]
