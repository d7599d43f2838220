"""A PTX interpreter for the mock NVIDIA GPU: parse (`parse`), compile each instruction to a numpy
function (`ops`, `memory`, `warp`, `tensor`) and run grids of CTAs (`execute`). `audit` lists
what a module uses that the interpreter does not support."""
from __future__ import annotations

from runtime.drivers.mock.ptx.execute import Grid, Kernel, LaunchEnv, PtxFault
from runtime.drivers.mock.ptx.loader import kernel_for

__all__ = ["Grid", "Kernel", "LaunchEnv", "PtxFault", "kernel_for"]
