"""The mock NVIDIA GPU's side of a launch whose program address holds a PTX entry record
(runtime.drivers.nv.ptx describes the image): find the module and kernel, build the launch
environment from the QMD and constant bank 0, and run the grid."""
from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

from runtime.drivers.mock.amd_hazards import RecordingMemory
from runtime.drivers.mock.ptx.execute import Grid, LaunchEnv, PtxFault
from runtime.drivers.mock.ptx.loader import kernel_for
from runtime.drivers.mock.ptx.ops import Unsupported
from runtime.drivers.mock.ptx.parse import PtxSyntaxError
from runtime.drivers.nv.ptx import ENTRY_HEADER, read_entry_record

if TYPE_CHECKING:
    from runtime.drivers.mock.nv_gpu import Launch, MockChannel


def grid_for(launch: "Launch") -> Grid | None:
    """The grid a launch runs, or None when its program address holds no PTX entry record (a
    cubin's SASS, which the mock does not execute). Raises `PtxFault` for a module the
    interpreter cannot run.

    The kernel compiled for a program address is remembered by the GPU (`MockNVGPU.ptx_programs`)
    with the entry record and module text it came from; a launch reads both again and reuses it
    only when they are unchanged, so code written over a program is what runs next."""
    gpu = launch.gpu
    mem = gpu.mem
    head = mem.read(launch.program_va, ENTRY_HEADER.size)
    if head[:4] != b"\x7fPTX":
        return None
    nlen = struct.unpack_from("<H", head, 6)[0]
    raw = mem.read(launch.program_va, ENTRY_HEADER.size + nlen)
    rec = read_entry_record(raw)
    if rec is None:
        raise PtxFault(f"program at {launch.program_va:#x}: a PTX entry record of an unknown "
                       "version")
    name, msize, data_off, rel, shared_base, static_end = rec
    image_va = launch.program_va + rel
    text = mem.read(image_va, msize)
    known = gpu.ptx_programs.get(launch.program_va)
    if known is not None and known[0] == raw and known[1] == text:
        kern = known[2]
    else:
        try:
            kern = kernel_for(text.rstrip(b"\0"), name)
        except (Unsupported, PtxSyntaxError, KeyError) as e:
            raise PtxFault(f"kernel {name}: the PTX interpreter cannot run it: {e}") from None
        if len(gpu.ptx_programs) >= _PROGRAMS_KEPT:
            gpu.ptx_programs.clear()
        gpu.ptx_programs[launch.program_va] = (raw, text, kern)
    cb = gpu.generation.cb0
    shared_window, local_window = struct.unpack_from("<QQ", launch.cb0, cb.shared_window)
    env = LaunchEnv(mem, launch.grid, launch.block, launch.shared_B, launch.cb0,
                    gpu.generation.param_base, shared_window, local_window, image_va,
                    image_va + data_off, shared_base, static_end, clock_ns=gpu.clock_ns)
    return Grid(kern, env)


# program addresses whose compiled kernel a GPU remembers (a droppable cache, emptied when full)
_PROGRAMS_KEPT = 256

#: How long one step of the channel runs a grid before letting the host (and other channels) in:
#: a kernel that never ends keeps its channel busy without hanging the caller.
SLICE_S = 0.05


class PtxLaunch:
    """A PTX grid running on a channel, advanced in time slices each time the channel runs
    (the launch method is retried while the grid is not done, as a blocked acquire is). While it
    runs, the mock kernel's standing status names the warps' positions."""

    def __init__(self, ch: "MockChannel", grid: Grid, release: tuple[int, int] | None) -> None:
        self.ch, self.grid, self.release = ch, grid, release
        self.started = time.perf_counter()
        self.status_set = False   # whether the mock kernel's standing status names this grid
        #: what the grid's memory accesses touched since `record()` (None before), so that the
        #: host-race watch can tell the grid's own writes from the host's
        self.recording: RecordingMemory | None = None
        #: whether the recording began before the grid's first slice
        self.recorded_whole = False

    def record(self) -> None:
        """From now on, notes the byte ranges the grid reads and writes (where it does already:
        merges what it noted, which grows by one range per access). Only grids the host-race
        watch looks at pay for this."""
        if self.recording is None:
            self.recording = RecordingMemory(self.grid.env.mem)
            self.grid.env.mem = self.recording  # type: ignore[assignment]
        else:
            self.recording.compact()

    @property
    def key(self) -> str:
        """The mock kernel status this grid sets while it runs for more than one slice."""
        return f"nvidia{self.ch.gpu.index}-channel{self.ch.chid}"

    @classmethod
    def start(cls, ch: "MockChannel", launch: "Launch",
              release: tuple[int, int] | None) -> "PtxLaunch | None":
        """The PTX grid of `launch`, or None when its program is not PTX."""
        from runtime.drivers.mock.nv_gpu import XID_GR_EXCEPTION, ChannelFault
        try:
            grid = grid_for(launch)
        except PtxFault as e:
            raise ChannelFault(str(e), XID_GR_EXCEPTION, e.va) from None
        return None if grid is None else cls(ch, grid, release)

    def resume(self) -> None:
        """Runs the next slice; completes the launch (its release is queued) or raises the
        channel's blocked signal with where the warps are."""
        from runtime.drivers.mock.nv_gpu import (XID_GR_EXCEPTION, XID_MMU_FAULT, ChannelFault,
                                                 _Blocked)
        os_ = self.ch.gpu.driver.os
        try:
            done = self.grid.advance(SLICE_S)
        except PtxFault as e:
            self.ch.ptx = None
            if self.status_set:
                os_.clear_kernel_status(self.key)
            raise ChannelFault(str(e), XID_GR_EXCEPTION if e.va is None else XID_MMU_FAULT,
                               e.va) from None
        if not done:
            t = time.perf_counter() - self.started
            what = f"kernel {self.grid.kern.name} running for {t:.2f} s: {self.grid.describe()}"
            os_.set_kernel_status(self.key, f"mock nvidia{self.ch.gpu.index}: channel "
                                  f"{self.ch.chid}: {what}")
            self.status_set = True
            raise _Blocked(what)
        self.ch.ptx = None
        if self.status_set:
            os_.clear_kernel_status(self.key)
        if self.release is not None:
            self.ch.grid_releases.append(self.release)
