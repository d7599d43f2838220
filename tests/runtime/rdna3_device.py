"""Devices for the RDNA3 interpreter tests.

`DriverDevice`: code objects run through the AMD runtime on the mock GPU (AMDDevice over a
MockOS): the driver loads the image, lays out the kernel arguments and user SGPRs and writes the
PM4 dispatch, and the mock GPU's PM4 processor decodes it for the interpreter, as on hardware.
Only for launches the driver cannot express (a GWS range, which no gfx11 KFD queue has; an
instruction limit) does `launch` hand the interpreter a `DispatchRecord` itself, built from the
driver's own program (its kernel-argument block, user SGPR values and register words);
test_rdna3_device checks that record against what the PM4 processor decodes.

`ArrayDevice`: the same mock GPU for tests that pass numpy arrays in and out of launches made
with the driver's own `program()` (Buffers as arguments).

`RawDevice`: bare machine code (no code object, no kernel arguments) on a MockMemory, for
instruction-level tests: the registers are given by the test.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from runtime.drivers.mock.memory import MockMemory
from runtime.drivers.mock.rdna3 import DispatchRecord, ExecStats, ProgramCache, execute
from runtime.drivers.mock.rdna3.gws import GwsRange

PAGE = 0x1000
LDS_GRANULE_B = 512   # gfx11 RSRC2.LDS_SIZE unit


def _dims(grid: Sequence[int], block: Sequence[int]
          ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    return (g[0], g[1], g[2]), (b[0], b[1], b[2])


class ArrayDevice:
    """AMDDevice("mock-amd:0") with numpy put/get; `d` is the device for `program()`."""

    def __init__(self, timeout_ms: float = 60_000) -> None:
        from runtime.drivers.amd.device import AMDDevice
        self.d = AMDDevice("mock-amd:0")
        # A hang must fail the test, not stall it: far above what the kernels need.
        self.d.default_timeout_ms = timeout_ms

    def put(self, a: np.ndarray) -> Any:
        buf = self.d.alloc(max(a.nbytes, 4))
        self.d.copyin(buf, np.ascontiguousarray(a).tobytes())
        return buf

    def get(self, buf: Any, n: int, dt: Any) -> np.ndarray:
        out = np.empty(n, dtype=dt)
        self.d.copyout(out, buf)
        return out

    def close(self) -> None:
        self.d.close()


class DriverDevice:
    """alloc/upload/download/load/launch over AMDDevice("mock-amd:0"); addresses are ints."""

    def __init__(self) -> None:
        from runtime.drivers.amd.device import AMDDevice
        from runtime.drivers.mock.os import MockOS
        self.mos = MockOS.with_amd_gpus(1)
        self.gpu = self.mos.drivers[0].gpus[0]
        self.d = AMDDevice("mock-amd:0", os=self.mos)
        self.d.default_timeout_ms = 600_000  # the interpreter is slow; a hang is a fault anyway
        self.mem: MockMemory = self.gpu.mem
        self.cache = ProgramCache()
        self._bufs: dict[int, Any] = {}

    def alloc(self, nbytes: int) -> int:
        """A fresh buffer's address (the driver leaves unmapped space after each buffer)."""
        buf = self.d.alloc(max(nbytes, 4))
        self._bufs[buf.va] = buf
        return buf.va

    def upload(self, arr: np.ndarray | bytes) -> int:
        data = arr.tobytes() if isinstance(arr, np.ndarray) else bytes(arr)
        va = self.alloc(len(data))
        self.d.copyin(self._bufs[va], data)
        return va

    def download(self, va: int, count: int, dtype: Any) -> np.ndarray:
        out = np.empty(count, dtype=dtype)
        self.d.copyout(out, self._bufs[va])
        return out

    def load(self, code_object: bytes, name: str | None = None):  # type: ignore[no-untyped-def]
        """The driver's program for kernel `name` (the only kernel when None)."""
        from runtime.drivers.amd.elf import parse
        if name is None:
            kernels = sorted(parse(code_object).kernels)
            if len(kernels) != 1:
                raise ValueError(f"code object has kernels {kernels}; name one")
            name = kernels[0]
        return self.d.program(code_object, name)

    def launch(self, prg, args: Sequence[Any], grid: Sequence[int],  # type: ignore[no-untyped-def]
               block: Sequence[int], *, gws: GwsRange | None = None,
               max_wave_instructions: int | None = None) -> ExecStats:
        """Runs `prg` over `grid` workgroups of `block` threads through the driver and the mock
        GPU; with `gws` or `max_wave_instructions`, on the interpreter with the driver's record."""
        grid3, block3 = _dims(grid, block)
        if gws is not None or max_wave_instructions is not None:
            return self.interpret(prg, args, grid3, block3, gws=gws,
                                  max_wave_instructions=max_wave_instructions)
        before = self.gpu.dispatch_count
        prg(*args, global_size=grid3, local_size=block3, wait=True)
        assert self.gpu.dispatch_count == before + 1, "the dispatch did not reach the GPU"
        return self.gpu.dispatches[-1].stats

    def interpret(self, prg, args: Sequence[Any], grid: Sequence[int],  # type: ignore
                  block: Sequence[int], *, gws: GwsRange | None = None,
                  max_wave_instructions: int | None = None) -> ExecStats:
        """The launch run by the interpreter itself with the driver's record (`dispatch_record`),
        so its KernelFault reaches the caller as it is (the mock GPU would report it as a
        device fault)."""
        rec = replace(self.dispatch_record(prg, args, grid, block), gws=gws)
        kw = {} if max_wave_instructions is None else \
            {"max_wave_instructions": max_wave_instructions}
        return execute(rec, self.mem, cache=self.cache, **kw)

    def dispatch_record(self, prg, args: Sequence[Any],  # type: ignore[no-untyped-def]
                        grid: Sequence[int], block: Sequence[int]) -> DispatchRecord:
        """The dispatch the driver would send for this launch: its kernel-argument block
        (written by the driver into its argument arena), its user SGPR values and register
        words, as the PM4 processor decodes them from SET_SH_REG and DISPATCH_DIRECT. Whoever
        runs the record reads GPU memory directly, so the driver's copies (code, arguments,
        uploads) must have arrived first: the mock GPU runs its queues asynchronously."""
        self.d.synchronize()
        grid3, block3 = _dims(grid, block)
        gc = self.d.gfx.gc
        ka = prg.fill_kernargs(list(args), grid3, block3)
        n_user = (prg.rsrc2 & gc.COMPUTE_PGM_RSRC2__USER_SGPR_MASK) \
            >> gc.COMPUTE_PGM_RSRC2__USER_SGPR__SHIFT
        user = prg.user_data(ka.va)
        user += [0] * (n_user - len(user))
        lds = ((prg.rsrc2 & gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK)
               >> gc.COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT) * LDS_GRANULE_B
        wave64 = not prg.dispatch_initiator & gc.COMPUTE_DISPATCH_INITIATOR__CS_W32_EN_MASK
        s = prg.scratch
        return DispatchRecord(prg.pgm_va, prg.rsrc1, prg.rsrc2, prg.rsrc3, tuple(user), grid3,
                              block3, lds, s.base_va, scratch_wave_B=s.wave_B,
                              scratch_slots=s.waves, wave64=wave64)

    def close(self) -> None:
        self.d.close()


class RawDevice:
    """A MockMemory with a bump allocator (an unmapped guard gap after every buffer) that runs
    bare machine code."""

    def __init__(self, base_va: int = 0x7F00_0000_0000, guard_B: int = PAGE) -> None:
        self.mem = MockMemory()
        self._next = base_va
        self.guard_B = guard_B
        self.cache = ProgramCache()

    def alloc(self, nbytes: int) -> int:
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

    def launch_raw(self, code: bytes, user_sgprs: Sequence[int], grid: Sequence[int],
                   block: Sequence[int], *, vgprs: int = 32, tgid: tuple[bool, ...] = (True,),
                   lds_bytes: int = 0, scratch_per_lane_B: int = 0, wave64: bool = False,
                   gws: GwsRange | None = None, **kw: Any) -> ExecStats:
        """Runs bare machine code: copied to a fresh 256-B aligned buffer and terminated with
        s_code_end; RSRC1/RSRC2 from the arguments (wave32 unless `wave64`, `vgprs` VGPRs, the
        user SGPRs, then workgroup ids for the dimensions `tgid` enables); `scratch_per_lane_B`
        gives every wave a scratch slot of that many bytes per lane; `gws`: a GWS range."""
        va = self.upload(bytes(code) + (0xBF9F0000).to_bytes(4, "little") * 4)
        grid3, block3 = _dims(grid, block)
        rsrc1 = max(0, -(-vgprs // 8) - 1)
        rsrc2 = len(user_sgprs) << 1 | sum(1 << (7 + i) for i, on in enumerate(tgid) if on)
        rsrc2 |= (2 if block3[2] > 1 else 1 if block3[1] > 1 else 0) << 11
        rsrc2 |= -(-lds_bytes // LDS_GRANULE_B) << 15
        scratch: dict[str, Any] = {}
        if scratch_per_lane_B:
            wave_B = -(-scratch_per_lane_B * 32 // 256) * 256
            gx, gy, gz = grid3
            slots = gx * gy * gz * -(-block3[0] * block3[1] * block3[2] // 32)
            scratch = dict(scratch_va=self.alloc(slots * wave_B), scratch_wave_B=wave_B,
                           scratch_slots=slots)
        rec = DispatchRecord(pgm_addr=va, rsrc1=rsrc1, rsrc2=rsrc2, rsrc3=0,
                             user_sgprs=tuple(user_sgprs), grid=grid3, block=block3,
                             lds_bytes=-(-lds_bytes // LDS_GRANULE_B) * LDS_GRANULE_B,
                             wave64=wave64, gws=gws, **scratch)
        return execute(rec, self.mem, cache=self.cache, **kw)
