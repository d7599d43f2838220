"""The mock NVIDIA GPU's side of a launch whose program address holds a PTX entry record
(runtime.drivers.nv.ptx describes the image): find the module and kernel, build the launch
environment from the QMD and constant bank 0, and run the grid."""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from runtime.drivers.mock.ptx.execute import Grid, LaunchEnv, PtxFault
from runtime.drivers.mock.ptx.loader import kernel_for
from runtime.drivers.mock.ptx.ops import Unsupported
from runtime.drivers.mock.ptx.parse import PtxSyntaxError
from runtime.drivers.nv.ptx import ENTRY_HEADER, read_entry_record

if TYPE_CHECKING:
    from runtime.drivers.mock.nv_gpu import Launch


def grid_for(launch: "Launch") -> Grid | None:
    """The grid a launch runs, or None when its program address holds no PTX entry record (a
    cubin's SASS, which the mock does not execute). Raises `PtxFault` for a module the
    interpreter cannot run."""
    gpu = launch.gpu
    mem = gpu.mem
    head = mem.read(launch.program_va, ENTRY_HEADER.size)
    if head[:4] != b"\x7fPTX":
        return None
    nlen = struct.unpack_from("<H", head, 6)[0]
    rec = read_entry_record(mem.read(launch.program_va, ENTRY_HEADER.size + nlen))
    if rec is None:
        raise PtxFault(f"program at {launch.program_va:#x}: a PTX entry record of an unknown "
                       "version")
    name, msize, data_off, rel, shared_base, static_end = rec
    image_va = launch.program_va + rel
    text = mem.read(image_va, msize).rstrip(b"\0")
    try:
        kern = kernel_for(text, name)
    except (Unsupported, PtxSyntaxError, KeyError) as e:
        raise PtxFault(f"kernel {name}: the PTX interpreter cannot run it: {e}") from None
    cb = gpu.generation.cb0
    shared_window, local_window = struct.unpack_from("<QQ", launch.cb0, cb.shared_window)
    env = LaunchEnv(mem, launch.grid, launch.block, launch.shared_B, launch.cb0,
                    gpu.generation.param_base, shared_window, local_window, image_va,
                    image_va + data_off, shared_base, static_end, clock_ns=gpu.clock_ns)
    return Grid(kern, env)


def run_ptx(launch: "Launch") -> None:
    """Runs a launch's PTX kernel to completion (nothing when the program is not PTX)."""
    grid = grid_for(launch)
    if grid is None:
        return
    grid.advance(float("inf"))
