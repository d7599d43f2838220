"""Shared helpers for the RDNA3 interpreter tests: where kernels live, compiling them once."""
from __future__ import annotations

import shutil
from functools import lru_cache
from pathlib import Path

import pytest

from runtime.drivers.amd.compiler import AMDCompiler

ROOT = Path(__file__).resolve().parents[2]
# Reference code objects with their expected kernel descriptors and metadata (build.sh rebuilds them).
REFERENCE_KERNELS = Path(__file__).resolve().parent / "data" / "amd_reference"
OUR_KERNELS = Path(__file__).resolve().parent / "kernels_amd"
REFERENCE_NAMES = ["vector_add", "saxpy", "reduce_sum", "int_branch", "matrix_2d", "float4_dual",
                   "vector_add_cov5"]

needs_compiler = pytest.mark.skipif(
    AMDCompiler().available() is not None,
    reason=f"OpenCL compiler unavailable: {AMDCompiler().available()}")
needs_objdump = pytest.mark.skipif(shutil.which("llvm-objdump-16") is None,
                                   reason="llvm-objdump-16 not installed (Debian llvm-16)")


@lru_cache(maxsize=None)
def compiled(name: str) -> bytes:
    """Our kernel tests/runtime/kernels_amd/NAME.cl compiled once per test session."""
    return AMDCompiler().compile((OUR_KERNELS / f"{name}.cl").read_text())


def reference(name: str) -> bytes:
    return (REFERENCE_KERNELS / f"{name}.hsaco").read_bytes()


def our_kernel_names() -> list[str]:
    return sorted(p.stem for p in OUR_KERNELS.glob("*.cl"))
