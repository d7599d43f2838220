"""Programs: a loaded kernel, its kernel-argument layout, and launches.

Drivers parse their code-object format (AMDHSA ELF, NVIDIA cubin), load the code into GPU memory and
describe the explicit arguments as `ArgSlot`s; this base class writes arguments into a
kernel-argument block and launches through the device's compute queue, optionally timing the launch
on the GPU clock.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import Buffer
from runtime.hcq.queue import as_tuple3

if TYPE_CHECKING:
    from runtime.hcq.device import Device

ArgValue = Buffer | int | float | bytes


@dataclass(frozen=True)
class ArgSlot:
    """One explicit kernel argument: byte `offset` and `size` in the argument block; `kind` is
    "buffer" (a GPU address) or "value" (a scalar passed by value)."""

    name: str
    offset: int
    size: int
    kind: str


@dataclass
class KernArgs:
    """A kernel-argument block in GPU memory: `va` is what the kernel sees as its argument pointer,
    `view` the CPU view of the explicit arguments (and whatever the driver placed after them)."""

    va: int
    view: memoryview
    slots: tuple[ArgSlot, ...]

    def set(self, index: int, value: ArgValue) -> None:
        """Writes explicit argument `index` (a buffer's address, an int or a float)."""
        try:
            slot = self.slots[index]
        except IndexError:
            raise ProgramError(f"argument {index} out of range: kernel has "
                               f"{len(self.slots)}") from None
        write_arg(self.view, slot, value)


_INT_FMT = {1: "<B", 2: "<H", 4: "<I", 8: "<Q"}


def write_arg(view: memoryview, slot: ArgSlot, value: ArgValue) -> None:
    """Stores one argument at its slot (two's complement for negative ints, IEEE for floats, raw
    bytes of exactly the slot's size for a struct passed by value). A numpy scalar of the slot's
    size is stored bit for bit (np.float32(x) stays that float32); of another size, as its Python
    value."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "dtype"):  # a numpy scalar
        if value.dtype.itemsize == slot.size:  # type: ignore[union-attr]
            value = value.tobytes()  # type: ignore[union-attr]
        else:
            value = value.item()  # type: ignore[union-attr]
    if isinstance(value, (bytes, bytearray)):
        if len(value) != slot.size:
            raise ProgramError(f"argument {slot.name!r} is {slot.size} B, got {len(value)} bytes")
        view[slot.offset:slot.offset + slot.size] = value
    elif isinstance(value, Buffer):
        value._check_live()
        if slot.size != 8:
            raise ProgramError(f"argument {slot.name!r} is {slot.size} B; a buffer address needs 8")
        struct.pack_into("<Q", view, slot.offset, value.va)
    elif isinstance(value, float):
        fmt = {4: "<f", 8: "<d", 2: "<e"}.get(slot.size)
        if fmt is None:
            raise ProgramError(f"cannot pass a float in the {slot.size}-B argument {slot.name!r}")
        struct.pack_into(fmt, view, slot.offset, value)
    elif isinstance(value, int):
        fmt = _INT_FMT.get(slot.size)
        if fmt is None:
            raise ProgramError(f"cannot pass an int in the {slot.size}-B argument {slot.name!r}")
        bits = slot.size * 8
        if not -(1 << (bits - 1)) <= value < (1 << bits):
            raise ProgramError(f"{value} does not fit the {slot.size}-B argument {slot.name!r}")
        struct.pack_into(fmt, view, slot.offset, value & ((1 << bits) - 1))
    else:
        raise ProgramError(f"argument {slot.name!r}: expected Buffer, int, float or bytes, "
                           f"got {type(value).__name__}")


class Program:
    """A kernel loaded on a device. Drivers set `slots` (explicit arguments) and implement
    `_kernargs_size` / `_fill_block` for their ABI (AMD: dispatch packet and hidden arguments)."""

    def __init__(self, device: "Device", name: str, lib: bytes) -> None:
        self.device, self.name, self.lib = device, name, lib
        self.slots: tuple[ArgSlot, ...] = ()
        self._t0 = device.new_signal()
        self._t1 = device.new_signal()

    def fill_kernargs(self, args: Sequence[ArgValue], global_size: Sequence[int],
                      local_size: Sequence[int], block: tuple[int, memoryview] | None = None,
                      ) -> KernArgs:
        """Writes a kernel-argument block for one launch (into `block` = (va, view) when given, else
        into fresh memory from the device's argument arena)."""
        if len(args) != len(self.slots):
            names = ", ".join(s.name for s in self.slots)
            raise ProgramError(f"{self.name} takes {len(self.slots)} arguments ({names}), "
                               f"got {len(args)}")
        gsz, lsz = as_tuple3(global_size, "global_size"), as_tuple3(local_size, "local_size")
        if block is None:
            block = self.device._kernarg_arena().take(self._kernargs_size(), 64)
        va, view = block
        kargs = self._fill_block(va, view, gsz, lsz)
        for slot, value in zip(self.slots, args):
            write_arg(kargs.view, slot, value)
        return kargs

    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = (),
                 global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 wait: bool = False, timeout_ms: float | None = None) -> float | None:
        """Launches with `args` (buffers and scalars, in the kernel's order; `vals` are appended) on
        a grid of `global_size` workgroups of `local_size` threads. With `wait`, blocks until done
        and returns the kernel's duration in seconds of GPU clock."""
        dev = self.device
        kargs = self.fill_kernargs(tuple(args) + tuple(vals), global_size, local_size)
        v = dev.next_timeline()
        q = dev.compute_queue().wait(dev.timeline_signal, v - 1).memory_barrier()
        if wait:
            q.timestamp(self._t0)
        q.exec(self, kargs, global_size, local_size)
        if wait:
            q.timestamp(self._t1)
        q.signal(dev.timeline_signal, v).submit()
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz

    def _kernargs_size(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement _kernargs_size")

    def _fill_block(self, va: int, view: memoryview, global_size: tuple[int, int, int],
                    local_size: tuple[int, int, int]) -> KernArgs:
        raise NotImplementedError(f"{type(self).__name__} must implement _fill_block")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r} on {self.device.name})"
