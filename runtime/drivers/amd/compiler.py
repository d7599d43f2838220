"""OpenCL C → AMDHSA code object, with Debian's clang-16 and ld.lld-16.

`AMDCompiler("gfx1100").compile(src)` runs
  clang-16 -x cl -cl-std=CL2.0 -cl-kernel-arg-info -target amdgcn-amd-amdhsa -mcpu=ARCH -O2
           -nogpulib -include PRELUDE -c
  ld.lld-16 -shared
and returns the linked code object's bytes. `-nogpulib`: Debian's rocm-device-libs (5.2) has no
gfx1100, so the work-item functions, barriers, atomics and the math built-ins kernels use come from
`OCL_PRELUDE` below, which maps them onto clang's AMDGPU builtins and LLVM intrinsics (the backend
expands sqrt/exp/log/fma/division itself). The major version is pinned: other LLVM versions change
code generation and the code-object defaults the rest of the runtime relies on.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from runtime.hcq.errors import ProgramError

CLANG = "clang-16"
LLD = "ld.lld-16"

# Work-item functions: clang's builtins read the AQL dispatch packet (code object v4) or the
# implicit kernel arguments (v5) themselves. No global offset is supported (always 0).
OCL_PRELUDE = r"""
#define __DIM(d, f) ((d) == 0 ? f##_x() : (d) == 1 ? f##_y() : f##_z())
#define get_work_dim() 3u
#define get_local_id(d)    ((size_t)__DIM(d, __builtin_amdgcn_workitem_id))
#define get_group_id(d)    ((size_t)__DIM(d, __builtin_amdgcn_workgroup_id))
#define get_local_size(d)  ((size_t)__DIM(d, __builtin_amdgcn_workgroup_size))
#define get_global_size(d) ((size_t)__DIM(d, __builtin_amdgcn_grid_size))
#define get_num_groups(d)  ((get_global_size(d) + get_local_size(d) - 1) / get_local_size(d))
#define get_global_offset(d) ((size_t)0)
#define get_global_id(d)   (get_group_id(d) * get_local_size(d) + get_local_id(d))
/* barrier(): workgroup release fence, s_barrier, workgroup acquire fence (what ROCm's ockl does) */
#define barrier(flags) do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); \
    __builtin_amdgcn_s_barrier(); __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
#define work_group_barrier(flags) barrier(flags)
#define mem_fence(flags) __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "workgroup")

/* OpenCL 1.x atomics: relaxed, device ("agent") scope, which the backend turns into single
   global_atomic_* instructions (system scope would become compare-and-swap loops). */
#define __AGENT 4
#define atomic_add(p, v)  __hip_atomic_fetch_add((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_sub(p, v)  __hip_atomic_fetch_add((p), -(v), __ATOMIC_RELAXED, __AGENT)
#define atomic_inc(p)     __hip_atomic_fetch_add((p), 1, __ATOMIC_RELAXED, __AGENT)
#define atomic_dec(p)     __hip_atomic_fetch_add((p), -1, __ATOMIC_RELAXED, __AGENT)
#define atomic_min(p, v)  __hip_atomic_fetch_min((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_max(p, v)  __hip_atomic_fetch_max((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_and(p, v)  __hip_atomic_fetch_and((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_or(p, v)   __hip_atomic_fetch_or((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_xor(p, v)  __hip_atomic_fetch_xor((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_xchg(p, v) __hip_atomic_exchange((p), (v), __ATOMIC_RELAXED, __AGENT)
#define atomic_cmpxchg(p, c, v) __extension__({ __typeof__(*(p)) __c = (c); \
    __hip_atomic_compare_exchange_strong((p), &__c, (v), __ATOMIC_RELAXED, __ATOMIC_RELAXED, \
                                         __AGENT); __c; })

/* Math built-ins used by kernels, as overloads for float and double. */
#define __OVL static inline __attribute__((overloadable, always_inline))
#define __UNARY(name, fb, db) __OVL float name(float x) { return fb(x); } \
                              __OVL double name(double x) { return db(x); }
#define __BINARY(name, fb, db) __OVL float name(float x, float y) { return fb(x, y); } \
                               __OVL double name(double x, double y) { return db(x, y); }
__UNARY(sqrt, __builtin_sqrtf, __builtin_sqrt)
__UNARY(fabs, __builtin_fabsf, __builtin_fabs)
__UNARY(floor, __builtin_floorf, __builtin_floor)
__UNARY(ceil, __builtin_ceilf, __builtin_ceil)
__UNARY(trunc, __builtin_truncf, __builtin_trunc)
__UNARY(rint, __builtin_rintf, __builtin_rint)
__UNARY(exp2, __builtin_exp2f, __builtin_exp2)
__UNARY(exp, __builtin_expf, __builtin_exp)
__UNARY(log2, __builtin_log2f, __builtin_log2)
__UNARY(log, __builtin_logf, __builtin_log)
__BINARY(fmin, __builtin_fminf, __builtin_fmin)
__BINARY(fmax, __builtin_fmaxf, __builtin_fmax)
__BINARY(copysign, __builtin_copysignf, __builtin_copysign)
__OVL float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__OVL double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
__OVL float mad(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
__OVL float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
__OVL int min(int a, int b) { return a < b ? a : b; }
__OVL int max(int a, int b) { return a > b ? a : b; }
__OVL uint min(uint a, uint b) { return a < b ? a : b; }
__OVL uint max(uint a, uint b) { return a > b ? a : b; }
__OVL float min(float a, float b) { return __builtin_fminf(a, b); }
__OVL float max(float a, float b) { return __builtin_fmaxf(a, b); }
__OVL int abs(int a) { return a < 0 ? -a : a; }
__OVL uint clz(uint a) { return a ? (uint)__builtin_clz(a) : 32u; }
__OVL uint popcount(uint a) { return (uint)__builtin_popcount(a); }
__OVL uint mul_hi(uint a, uint b) { return (uint)(((ulong)a * b) >> 32); }
__OVL int mul_hi(int a, int b) { return (int)(((long)a * b) >> 32); }
__OVL int mad24(int a, int b, int c) { return ((a << 8) >> 8) * ((b << 8) >> 8) + c; }
__OVL uint mad24(uint a, uint b, uint c) { return (a & 0xffffffu) * (b & 0xffffffu) + c; }
__OVL float select(float a, float b, int c) { return c ? b : a; }
__OVL int select(int a, int b, int c) { return c ? b : a; }
"""
_PRELUDE_SHA = hashlib.sha256(OCL_PRELUDE.encode()).hexdigest()[:16]
# -cl-kernel-arg-info: the code object's metadata names each argument (.name), so errors and
# traces can say "argument 'n'" rather than "arg3".
_FIXED_FLAGS = ("-x", "cl", "-cl-std=CL2.0", "-cl-kernel-arg-info")


class CompileError(ProgramError):
    """The compiler or linker rejected the source (or is not installed); `.log` holds its messages
    verbatim. A ProgramError, so an HCQError like everything the runtime raises."""

    def __init__(self, tool: str, log: str, cmd: list[str]) -> None:
        self.tool, self.log, self.cmd = tool, log, cmd
        super().__init__(f"{tool} failed:\n{log.rstrip()}")


class AMDCompiler:
    """Compiles OpenCL C for one AMD target (`arch` as in -mcpu, e.g. "gfx1100")."""

    def __init__(self, arch: str = "gfx1100", *, code_object_version: int = 4, opt: str = "-O2",
                 clang: str = CLANG, lld: str = LLD, extra_args: tuple[str, ...] = ()) -> None:
        self.arch, self.cov, self.opt = arch, code_object_version, opt
        self.clang, self.lld, self.extra_args = clang, lld, tuple(extra_args)

    def available(self) -> str | None:
        """None if both tools are installed, else the reason compiling would fail."""
        for tool, pkg in ((self.clang, "clang-16"), (self.lld, "lld-16")):
            if shutil.which(tool) is None:
                return f"{tool} not found (Debian package {pkg})"
        return None

    def identity(self) -> str:
        """The tools' versions, target, code-object version, flags and the prelude's hash (part
        of cache keys)."""
        versions = []
        for tool in (self.clang, self.lld):
            try:
                out = subprocess.run([tool, "--version"], capture_output=True, text=True,
                                     check=False).stdout
            except OSError as e:
                out = f"unavailable: {e}"
            versions.append(out.strip().splitlines()[0] if out.strip() else tool)
        return " | ".join([*versions, self.arch, f"cov{self.cov}", self.opt,
                           " ".join(self.extra_args), " ".join(_FIXED_FLAGS),
                           f"prelude {_PRELUDE_SHA}"])

    def identity_stamp(self) -> str:
        """What `identity` depends on, without running the tools: their resolved paths, sizes
        and modification times, and this compiler's settings (see `CompileCache`)."""
        parts = []
        for tool in (self.clang, self.lld):
            found = shutil.which(tool)
            if found is None:
                parts.append(f"{tool}: missing")
                continue
            real = os.path.realpath(found)
            try:
                st = os.stat(real)
            except OSError:
                parts.append(f"{real}: unreadable")
                continue
            parts.append(f"{real}:{st.st_size}:{st.st_mtime_ns}")
        return " | ".join([*parts, self.arch, f"cov{self.cov}", self.opt,
                           " ".join(self.extra_args), " ".join(_FIXED_FLAGS), _PRELUDE_SHA])

    def compile(self, src: str, *, extra_args: tuple[str, ...] = ()) -> bytes:
        """OpenCL C source → AMDHSA code object bytes (ELF). Raises CompileError on failure."""
        missing = self.available()
        if missing:
            raise CompileError(self.clang, missing, [])
        with tempfile.TemporaryDirectory(prefix="amdcl-") as tmp:
            d = Path(tmp)
            (d / "prelude.h").write_text(OCL_PRELUDE)
            (d / "kernel.cl").write_text(src)
            cc = [self.clang, *_FIXED_FLAGS, "-target", "amdgcn-amd-amdhsa",
                  f"-mcpu={self.arch}", self.opt, "-nogpulib", f"-mcode-object-version={self.cov}",
                  "-include", str(d / "prelude.h"), *self.extra_args, *extra_args, "-c",
                  "-o", str(d / "kernel.o"), str(d / "kernel.cl")]
            self._run(self.clang, cc, d)
            ld = [self.lld, "-shared", "-o", str(d / "kernel.hsaco"), str(d / "kernel.o")]
            self._run(self.lld, ld, d)
            return (d / "kernel.hsaco").read_bytes()

    @staticmethod
    def _run(tool: str, cmd: list[str], tmp: Path) -> None:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if res.returncode != 0:
            # Paths of the temporary directory mean nothing to the caller.
            log = (res.stderr + res.stdout).replace(str(tmp) + "/", "")
            raise CompileError(tool, log, cmd)
