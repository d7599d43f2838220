"""CUDA C++ → cubin with NVRTC, through the generated `hcq_bindings.cuda.nvrtc` bindings.

NVRTC is a pure compiler: it needs no GPU and no kernel driver, so cubins for the mock device are
built on any x86-64 machine that has the library. `NVCompiler("sm_90").compile(src)` returns the
cubin bytes (an ELF with SASS for exactly that architecture; no PTX is embedded, so nothing is
JIT-compiled at load time).

Where the library comes from: the bindings name the sonames (libnvrtc.so.12, .13). Wheels install
them in site-packages folders that are not on the loader's search path, so `find_nvrtc` looks there
(and in the CUDA toolkit) and loads the library once by absolute path; after that the soname
resolves to the already-loaded library. `NVRTC_LIBRARY` overrides the search.
"""
from __future__ import annotations

import ctypes
import glob
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from runtime.hcq.errors import ArgumentError, ProgramError

# Folders that hold libnvrtc.so.* besides the loader's search path, most specific first: the CUDA 12
# wheel (nvidia-cuda-nvrtc-cu12), the CUDA 13 wheel (nvidia-cuda-nvrtc), the toolkit.
_WHEEL_GLOBS = ("nvidia/cuda_nvrtc/lib/libnvrtc.so.*", "nvidia/cu13/lib/libnvrtc.so.*",
                "nvidia/cu12/lib/libnvrtc.so.*")
_TOOLKIT_GLOBS = ("/usr/local/cuda/lib64/libnvrtc.so.*", "/usr/local/cuda-*/lib64/libnvrtc.so.*",
                  "/usr/lib/x86_64-linux-gnu/libnvrtc.so.*")


class CompileError(ProgramError):
    """NVRTC rejected the source; `log` is the compiler's log."""

    def __init__(self, msg: str, log: str = "") -> None:
        self.log = log
        super().__init__(msg + (f"\n{log}" if log else ""))


def _candidates() -> list[str]:
    env = os.environ.get("NVRTC_LIBRARY")
    if env:
        return [env]
    out: list[str] = []
    for base in sys.path:
        for pat in _WHEEL_GLOBS:
            out += sorted(glob.glob(os.path.join(base, pat)))
    for pat in _TOOLKIT_GLOBS:
        out += sorted(glob.glob(pat))
    # Only the real library (libnvrtc.so.12 / libnvrtc.so.13.0.88), never libnvrtc-builtins or .alt.
    return [p for p in out if Path(p).name.startswith("libnvrtc.so.")]


@lru_cache(maxsize=1)
def find_nvrtc() -> str:
    """Loads libnvrtc by path (so the bindings' soname lookup finds it) and returns the path, or
    raises `ProgramError` naming every place that was searched."""
    tried = []
    for path in _candidates():
        try:
            # NVRTC dlopens libnvrtc-builtins.so.X.Y by soname at compile time; some wheels give the
            # library no $ORIGIN run path, so the builtins beside it are loaded first, by path.
            for builtins in sorted(glob.glob(str(Path(path).parent / "libnvrtc-builtins.so.*"))):
                ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return path
        except OSError as e:
            tried.append(f"{path}: {e}")
    for soname in ("libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so"):
        try:
            ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
            return soname
        except OSError as e:
            tried.append(f"{soname}: {e}")
    raise ProgramError("NVRTC is not installed: install the wheel nvidia-cuda-nvrtc-cu12 (or a "
                       "CUDA toolkit) or set NVRTC_LIBRARY to libnvrtc.so's path; tried:\n  "
                       + "\n  ".join(tried))


class NVCompiler:
    """NVRTC for one architecture ("sm_90"). `compile` returns a cubin, or with `output="ptx"`
    PTX text for the architecture's virtual counterpart (compute_90): what a GPU that executes
    PTX (the mock NVIDIA GPU) loads."""

    def __init__(self, arch: str, extra_options: Sequence[str] = (), output: str = "cubin") -> None:
        if not arch.startswith("sm_"):
            raise ArgumentError(f"arch must look like sm_90, got {arch!r}")
        if output not in ("cubin", "ptx"):
            raise ArgumentError(f"output must be 'cubin' or 'ptx', got {output!r}")
        self.arch = arch
        self.output = output
        self.extra_options = tuple(extra_options)
        self.library = find_nvrtc()
        from hcq_bindings.cuda import nvrtc  # after find_nvrtc: the soname now resolves
        self._nv = nvrtc

    def version(self) -> tuple[int, int]:
        """NVRTC's (major, minor) version."""
        major, minor = ctypes.c_int32(), ctypes.c_int32()
        self._check(self._nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
        return major.value, minor.value

    def identity(self) -> str:
        """NVRTC's version, the architecture and the fixed options (part of cache keys)."""
        major, minor = self.version()
        return f"nvrtc {major}.{minor} {self.arch} {self.output} {' '.join(self.extra_options)}"

    @staticmethod
    def note_output(src: str, lib: bytes) -> None:
        """Remembers the parameter names of `src`'s kernels for the cubin `lib` (a cubin has none;
        programs loaded from it then name their arguments). `CompileCache` calls it on hits."""
        from runtime.drivers.nv.cubin import remember_param_names
        remember_param_names(src, lib)

    def _check(self, status: int, what: str, log: str = "") -> None:
        if status != self._nv.NVRTC_SUCCESS:
            name = self._nv.nvrtcGetErrorString(status)
            raise CompileError(f"{what} failed: {name.decode() if name else status}", log)

    def compile(self, src: str, name: str = "kernel.cu", options: Sequence[str] = ()) -> bytes:
        """Compiles CUDA C++ `src` to a cubin for this architecture (`-arch=sm_XX`, which makes
        NVRTC emit SASS rather than PTX), or to PTX text (`-arch=compute_XX`) when the compiler
        was made with `output="ptx"`. Kernels should be `extern "C"` (plain ELF names)."""
        nv = self._nv
        prog = nv.nvrtcProgram()
        self._check(nv.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0,
                                          None, None), "nvrtcCreateProgram")
        try:
            arch = self.arch if self.output == "cubin" else "compute_" + self.arch[3:]
            opts = [f"-arch={arch}", "-default-device", "-std=c++17",
                    *self.extra_options, *options]
            argv = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
            status = nv.nvrtcCompileProgram(prog, len(opts), argv)
            log = self._log(prog)
            self._check(status, f"compiling {name} for {arch}", log)
            size = nv.size_t()
            if self.output == "ptx":
                self._check(nv.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
                buf = ctypes.create_string_buffer(size.value)
                self._check(nv.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
                return buf.value
            self._check(nv.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
            if size.value == 0:
                raise CompileError(f"NVRTC produced no cubin for {self.arch} (is it a virtual "
                                   "architecture?)", log)
            buf = ctypes.create_string_buffer(size.value)
            self._check(nv.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
            self.note_output(src, buf.raw)
            return buf.raw
        finally:
            nv.nvrtcDestroyProgram(ctypes.byref(prog))

    def _log(self, prog: object) -> str:
        nv = self._nv
        size = nv.size_t()
        status = nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        if status != nv.NVRTC_SUCCESS or size.value <= 1:
            return ""
        buf = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, buf)
        return buf.value.decode(errors="replace").strip()
