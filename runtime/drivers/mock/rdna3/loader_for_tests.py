"""Stand-in for the AMD driver's launch path, for testing the interpreter on its own.

What `TestDevice.launch` does is what the real driver does through KFD and PM4, in the form the
hardware expects (AMDGPUUsage "Kernel Dispatch", "Initial Kernel Execution State"):
  * the code object's loaded image is copied into GPU memory; the entry point is the kernel
    descriptor's address plus its kernel_code_entry_byte_offset (COMPUTE_PGM_LO/HI = entry >> 8);
  * the kernarg segment holds the explicit arguments at their metadata offsets and, for code
    object v5, the hidden arguments (block counts, group sizes, remainders, grid dims);
  * a 64-B hsa_kernel_dispatch_packet_t is written for kernels that ask for dispatch_ptr (v4
    reads the group size from it);
  * the user SGPRs are laid out in the order kernel_code_properties enables them, padded to
    RSRC2.USER_SGPR;
  * RSRC2.LDS_SIZE, which the compiler leaves at 0, is set to the group segment size in 512-B
    granules, and the LDS allocation the PM4 side derives from it is passed along;
  * a kernel with a private segment gets scratch backing memory: one slot of
    private_segment_fixed_size x 64 lanes (in 256-B units) per wave, as TMPRING_SIZE describes.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from runtime.drivers.amd import elf
from runtime.drivers.mock.memory import MockMemory

from .errors import DispatchRecord, ExecStats
from .gws import GwsRange
from .interp import ProgramCache, execute
from .ops_mem import PRIVATE_APERTURE, SHARED_APERTURE

PAGE = 0x1000
LDS_GRANULE_B = 512  # gfx11 RSRC2.LDS_SIZE unit (what tinygrad and the guide use)
SCRATCH_SLOTS = 1024


@dataclass(frozen=True)
class LoadedKernel:
    name: str
    kernel: elf.Kernel
    image_va: int

    @property
    def entry_va(self) -> int:
        return self.image_va + self.kernel.entry_vaddr

    @property
    def kd_va(self) -> int:
        return self.image_va + self.kernel.kd_vaddr


class TestDevice:
    """A MockMemory with a bump allocator and the driver's dispatch preparation."""

    __test__ = False  # not a pytest test class

    def __init__(self, mem: MockMemory | None = None, base_va: int = 0x7F00_0000_0000,
                 guard_B: int = PAGE) -> None:
        self.mem = mem or MockMemory()
        self._next = base_va
        self.guard_B = guard_B
        self.cache = ProgramCache()

    # -- memory
    def alloc(self, nbytes: int) -> int:
        """Maps a fresh zeroed buffer; a guard gap follows so overruns fault."""
        va = self._next
        size = max(PAGE, -(-nbytes // PAGE) * PAGE)
        self.mem.map(va, size)
        self._next = va + size + self.guard_B
        return va

    def upload(self, arr: np.ndarray | bytes) -> int:
        raw = arr.tobytes() if isinstance(arr, np.ndarray) else bytes(arr)
        va = self.alloc(max(len(raw), 1))
        self.mem.write(va, raw)
        return va

    def download(self, va: int, count: int, dtype: Any) -> np.ndarray:
        dt = np.dtype(dtype)
        return np.frombuffer(self.mem.read(va, count * dt.itemsize), dtype=dt).copy()

    # -- code
    def load(self, code_object: bytes, name: str | None = None) -> LoadedKernel:
        co = elf.parse(code_object)
        if name is None:
            if len(co.kernels) != 1:
                raise ValueError(f"code object has kernels {sorted(co.kernels)}; name one")
            name = next(iter(co.kernels))
        image = co.image()
        va = self.upload(image)
        return LoadedKernel(name, co.kernels[name], va)

    # -- dispatch
    def dispatch_record(self, k: LoadedKernel, args: Sequence[Any], grid: tuple[int, ...],
                        block: tuple[int, ...], dynamic_lds_B: int = 0) -> DispatchRecord:
        gx, gy, gz = tuple(grid) + (1,) * (3 - len(grid))
        bx, by, bz = tuple(block) + (1,) * (3 - len(block))
        grid3, block3 = (gx, gy, gz), (bx, by, bz)
        kd = k.kernel.kd
        kernarg_va = self.upload(self._kernargs(k.kernel, args, grid3, block3))
        layout = kd.user_sgpr_layout()
        user = [0] * kd.user_sgpr_count
        if "dispatch_ptr" in layout:
            pkt = self.upload(self._dispatch_packet(k, grid3, block3, kernarg_va))
            _put64(user, layout["dispatch_ptr"], pkt)
        if "queue_ptr" in layout:
            _put64(user, layout["queue_ptr"], self.alloc(256))
        if "kernarg_segment_ptr" in layout:
            _put64(user, layout["kernarg_segment_ptr"], kernarg_va)
        lds = k.kernel.group_segment_size + dynamic_lds_B
        granules = math.ceil(lds / LDS_GRANULE_B)
        rsrc2 = (kd.rsrc2 & ~(0x1FF << 15)) | (granules & 0x1FF) << 15
        scratch: dict[str, Any] = {}
        if kd.private_segment_fixed_size or kd.rsrc2 & 1:
            # One scratch slot per wave of the dispatch (at most SCRATCH_SLOTS run at once).
            wave_B = -(-max(kd.private_segment_fixed_size, 16) * 64 // 256) * 256
            waves = grid3[0] * grid3[1] * grid3[2] * -(-block3[0] * block3[1] * block3[2] // 32)
            slots = max(32, min(SCRATCH_SLOTS, waves))
            scratch = dict(scratch_va=self.alloc(slots * wave_B), scratch_wave_B=wave_B,
                           scratch_slots=slots)
        return DispatchRecord(pgm_addr=k.entry_va, rsrc1=kd.rsrc1, rsrc2=rsrc2, rsrc3=kd.rsrc3,
                              user_sgprs=tuple(user), grid=grid3, block=block3,
                              lds_bytes=granules * LDS_GRANULE_B, wave64=not kd.wave32,
                              **scratch)

    def launch(self, k: LoadedKernel, args: Sequence[Any], grid: tuple[int, ...],
               block: tuple[int, ...], *, gws: GwsRange | None = None,
               **kw: Any) -> ExecStats:
        """Runs the kernel over `grid` workgroups of `block` threads (`gws`: the queue's GWS
        range)."""
        rec = replace(self.dispatch_record(k, args, grid, block), gws=gws)
        return execute(rec, self.mem, cache=self.cache, **kw)

    def launch_raw(self, code: bytes, user_sgprs: Sequence[int], grid: tuple[int, ...],
                   block: tuple[int, ...], *, vgprs: int = 32, tgid: tuple[bool, ...] = (True,),
                   lds_bytes: int = 0, scratch_per_lane_B: int = 0, wave64: bool = False,
                   gws: GwsRange | None = None, **kw: Any) -> ExecStats:
        """Runs bare machine code (no code object): for instruction-level tests.

        The code is copied to a fresh 256-B aligned buffer and terminated with s_code_end; the
        RSRC registers are built from the arguments (wave32, `vgprs` VGPRs, the user SGPRs,
        then workgroup ids for the dimensions `tgid` enables); `scratch_per_lane_B` gives every
        wave a scratch slot of that many bytes per lane; `gws` is the queue's GWS range.
        """
        va = self.upload(bytes(code) + (0xBF9F0000).to_bytes(4, "little") * 4)
        gx, gy, gz = tuple(grid) + (1,) * (3 - len(grid))
        bx, by, bz = tuple(block) + (1,) * (3 - len(block))
        grid3, block3 = (gx, gy, gz), (bx, by, bz)
        rsrc1 = max(0, -(-vgprs // 8) - 1)
        rsrc2 = len(user_sgprs) << 1 | sum(1 << (7 + i) for i, on in enumerate(tgid) if on)
        rsrc2 |= (2 if block3[2] > 1 else 1 if block3[1] > 1 else 0) << 11
        rsrc2 |= -(-lds_bytes // LDS_GRANULE_B) << 15
        scratch: dict[str, Any] = {}
        if scratch_per_lane_B:
            wave_B = -(-scratch_per_lane_B * 32 // 256) * 256
            slots = gx * gy * gz * -(-bx * by * bz // 32)
            scratch = dict(scratch_va=self.alloc(slots * wave_B), scratch_wave_B=wave_B,
                           scratch_slots=slots)
        rec = DispatchRecord(pgm_addr=va, rsrc1=rsrc1, rsrc2=rsrc2, rsrc3=0,
                             user_sgprs=tuple(user_sgprs), grid=grid3, block=block3,
                             lds_bytes=-(-lds_bytes // LDS_GRANULE_B) * LDS_GRANULE_B,
                             wave64=wave64, gws=gws, **scratch)
        return execute(rec, self.mem, cache=self.cache, **kw)

    @staticmethod
    def _kernargs(kernel: elf.Kernel, args: Sequence[Any], grid: tuple[int, int, int],
                  block: tuple[int, int, int]) -> bytes:
        buf = bytearray(max(kernel.kernarg_size, 8))
        explicit = [a for a in kernel.metadata.get(".args", [])
                    if not a[".value_kind"].startswith("hidden_")]
        if len(explicit) != len(args):
            raise ValueError(f"{kernel.name} takes {len(explicit)} arguments, got {len(args)}")
        for meta, val in zip(explicit, args):
            off, size = meta[".offset"], meta[".size"]
            buf[off:off + size] = _pack(val, size, meta)
        dims = 3 if grid[2] * block[2] > 1 else 2 if grid[1] * block[1] > 1 else 1
        hidden = {"hidden_block_count_x": (grid[0], "<I"), "hidden_block_count_y": (grid[1], "<I"),
                  "hidden_block_count_z": (grid[2], "<I"),
                  "hidden_group_size_x": (block[0], "<H"), "hidden_group_size_y": (block[1], "<H"),
                  "hidden_group_size_z": (block[2], "<H"),
                  "hidden_remainder_x": (0, "<H"), "hidden_remainder_y": (0, "<H"),
                  "hidden_remainder_z": (0, "<H"), "hidden_grid_dims": (dims, "<H"),
                  "hidden_shared_base": (SHARED_APERTURE, "<Q"),
                  "hidden_private_base": (PRIVATE_APERTURE, "<Q")}
        for meta in kernel.metadata.get(".args", []):
            kind = meta[".value_kind"]
            if kind in hidden:
                val, fmt = hidden[kind]
                struct.pack_into(fmt, buf, meta[".offset"], val)
        return bytes(buf)

    @staticmethod
    def _dispatch_packet(k: LoadedKernel, grid: tuple[int, int, int],
                         block: tuple[int, int, int], kernarg_va: int) -> bytes:
        """hsa_kernel_dispatch_packet_t (hsa.h): sizes in work-items, not workgroups."""
        dims = 3 if grid[2] * block[2] > 1 else 2 if grid[1] * block[1] > 1 else 1
        header = 2  # HSA_PACKET_TYPE_KERNEL_DISPATCH
        return struct.pack("<HHHHHHIIIIIQQQQ", header, dims, *block, 0,
                           *(g * b for g, b in zip(grid, block)),
                           k.kernel.kd.private_segment_fixed_size,
                           k.kernel.group_segment_size, k.kd_va, kernarg_va, 0, 0)


def _put64(user: list[int], at: int, value: int) -> None:
    user[at] = value & 0xFFFFFFFF
    user[at + 1] = value >> 32


def _pack(val: Any, size: int, meta: dict[str, Any]) -> bytes:
    if isinstance(val, (bytes, bytearray)):
        if len(val) != size:
            raise ValueError(f"argument at {meta['.offset']} needs {size} B, got {len(val)}")
        return bytes(val)
    if isinstance(val, np.ndarray) or isinstance(val, np.generic):
        raw = np.asarray(val).tobytes()
        if len(raw) != size:
            raise ValueError(f"argument at {meta['.offset']} needs {size} B, got {len(raw)}")
        return raw
    if isinstance(val, float):
        return struct.pack("<f" if size == 4 else "<d", val)
    if isinstance(val, int):
        return (val & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    raise TypeError(f"cannot pass {type(val).__name__} as a kernel argument")
