"""NVIDIA programs: a cubin kernel loaded into GPU memory, its QMD template and its launch block.

A launch block (the core's kernel-argument block) holds constant bank 0 followed by the QMD:

    +0                  cb0 driver area (blockDim, gridDim, shared/local windows, stack pointer,
                        parameter-block bounds: `Cb0Layout`), then the parameters at
                        EIATTR_PARAM_CBANK's offset (0x210 on sm_90)
    round_up(cb0, 256)  the QMD (SEND_PCAS_A takes its address >> 8)

The QMD template (every field that does not depend on the launch) and the cb0 driver area are built
once per program, and a shape's cb0 and QMD (grid and block in both: `QMD.launch_fields`) once per
shape (`launch_shape`, the one QMD builder). Every route writes its launch block from them with
`_write_block` (two slice copies and the address-dependent stores): the queue path
(`fill_kernargs`), the short path (`fill_fast`) and the hot path's slots (`block_template`).
"""
from __future__ import annotations

import re
import struct
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Sequence, overload

import numpy as np

from runtime.drivers.nv import cubin, ptx
from runtime.drivers.nv.qmd import QMD, DwordField
from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import Buffer, MemKind, round_up
from runtime.hcq.program import ArgSlot, ArgValue, KernArgs, Program, write_arg
from runtime.hcq.queue import as_tuple3

if TYPE_CHECKING:
    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.launcher import ShapeLauncher
    from runtime.drivers.nv.queue import LaunchCommands

_M32 = 0xFFFFFFFF
# Constant bank 0's layout and the launch limits are the generation record's (NVDevice.gen:
# runtime/drivers/nv/generation.py `Cb0Layout`, `Limits`).
INITIAL_STACK_POINTER = 0xFFFDC0
# Local memory every thread gets beyond its own stack: tinygrad adds 0x240 to EIATTR_MIN_STACK_SIZE
# (the driver's reserved per-thread area, inferred).
SLM_RESERVED_B = 0x240
PROGRAM_TAIL_B = 0x1000       # instruction prefetch may read past the end of .text (tinygrad)


@dataclass
class NVKernArgs(KernArgs):
    """A launch block: `view` covers the parameters (what `KernArgs.set` writes), `qmd` the QMD."""

    qmd: memoryview = field(default=memoryview(b""), repr=False)


@dataclass(frozen=True)
class LaunchShape:
    """One grid and block of a program, built once (`NVProgram.launch_shape`): the cb0 driver
    area and the QMD, without a release (`qmd`: the queue path's, whose `signal` may fold into
    it) and releasing the device's timeline with payload 0 (`qmd_timeline`: the launch paths
    patch the payload)."""

    cb0: bytes
    qmd: bytes
    qmd_timeline: bytes


class NVProgram(Program):
    """A kernel of a cubin, ready to launch on a compute channel of `device`.

    `dynamic_smem_B` is the dynamic shared memory every launch gets (CUDA's third launch
    parameter; Triton's `metadata.shared`)."""

    def __init__(self, device: "NVDevice", lib: bytes, name: str, dynamic_smem_B: int = 0) -> None:
        super().__init__(device, name, lib)
        self.nvdev = device
        #: the PTX module when `lib` is PTX text (a GPU that executes PTX: the mock)
        self.ptx_module: "ptx.PtxModule | None" = None
        if ptx.is_ptx(lib):
            if device.code_format != "ptx":
                raise ProgramError(f"{name}: this is PTX, and {device.name} runs SASS: compile "
                                   "it to a cubin (dev.compiler does) for this GPU")
            cub, self.ptx_module = ptx.load_info(lib, device.sm)
        else:
            cub = cubin.parse(lib)
        if cub.sm != device.sm:
            raise ProgramError(f"{name}: the cubin is for sm_{cub.sm}, the GPU is sm_{device.sm}")
        k = cub.kernels.get(name)
        if k is None:
            raise ProgramError(f"no kernel {name!r} in the cubin (has {sorted(cub.kernels)})")
        self.cubin, self.kernel = cub, k
        qcls: type[QMD] = device.qmd_class
        self.qmd_class = qcls
        # -- shared memory: the static section already counts the reserved 1 KiB on sm_90 (its size
        # is 0x400 for kernels without __shared__ data); a kernel without one still gets it.
        self.dynamic_smem_B = dynamic_smem_B
        self.shared_B = round_up(max(k.static_smem_B, cubin.RESERVED_SMEM_B) + dynamic_smem_B, 256)
        if self.shared_B > qcls.max_shared_B():
            raise ProgramError(f"{name}: {self.shared_B} B of shared memory exceed the "
                               f"{qcls.max_shared_B()} B a CTA may have")
        self.local_B = k.local_B + SLM_RESERVED_B
        device.ensure_local_memory(self.local_B)
        # -- load the image (relocated for its GPU address) through the copy engine
        self.lib_buf = device.alloc(cub.image_size + PROGRAM_TAIL_B, kind=MemKind.VRAM,
                                    executable=True)
        image = cub.image(self.lib_buf.va)
        device.copyin(self.lib_buf, image)
        self.prog_va = self.lib_buf.va + cub.offset_of(k.text)
        # -- constant bank 0 and the parameters
        self.param_base = k.param_base or device.default_param_base
        self.param_size = k.param_size
        cb = self._cb0 = device.gen.cb0
        self.cb0_B = max(k.cbank0_size, self.param_base + self.param_size, cb.param_end + 8)
        # Cubins carry no parameter names; those of a kernel NVRTC compiled here come from its
        # source (cubin.param_names_of). Nor types: an 8-B parameter may be a pointer or a double.
        names = cubin.param_names_of(lib, name)
        if names is None or len(names) != len(k.params):
            names = [f"arg{p.ordinal}" for p in k.params]
        self.slots = tuple(ArgSlot(names[i], p.offset, p.size,
                                   "" if p.size == 8 else "value")
                           for i, p in enumerate(k.params))
        if k.params and max(p.offset + p.size for p in k.params) > self.param_size:
            raise ProgramError(f"{name}: parameters run past EIATTR_PARAM_CBANK's "
                               f"{self.param_size} B")
        tmpl = bytearray(self.param_base)
        # one packed store each for windows + stack pointer and for block + grid dimensions
        assert (cb.local_window, cb.stack_pointer) == (cb.shared_window + 8, cb.shared_window + 16)
        assert cb.grid_dim == cb.block_dim + 12
        struct.pack_into("<QQI", tmpl, cb.shared_window, device.shared_window,
                         device.local_window, INITIAL_STACK_POINTER)
        struct.pack_into("<I", tmpl, cb.dynamic_smem, dynamic_smem_B)
        self.cb0_template = bytes(tmpl)
        # -- the QMD template
        q = qcls()
        q.set_common(sass_version=device.sass_version)
        q.set_program(self.prog_va)
        q.set_prefetch(self.prog_va, k.text.size)
        q.set_registers(max(k.registers, 1))
        q.set_shared_memory(self.shared_B)
        q.set_sm_config(self.shared_B)
        q.set_local_memory(device.slm_per_thread)
        q.set("BARRIER_COUNT", max(k.barriers, 1))
        for bank, sec in sorted({**cub.constbanks, **k.constbanks}.items()):
            q.set_cbuf(bank, self.lib_buf.va + cub.offset_of(sec), sec.size)
        q.set_cbuf(0, 0, self.cb0_B)  # address patched per launch
        q.prefetch_cbuf(0, self.cb0_B)
        self.qmd_template = bytes(q.data)
        lo, hi, shift = qcls.cbuf_addr_fields(0)
        self._cb0_hi, self._cb0_shift = hi, shift
        self._cb0_hi_word = struct.unpack_from("<I", q.data, 4 * hi.index)[0] \
            & ~(hi.mask << hi.shift) & _M32
        self._launch_packs = [(struct.Struct(_field_fmt(f)), 4 * f.index + f.shift // 8, f.mask)
                              for f in qcls.launch_fields()]
        self._short_commands: "LaunchCommands | None" = None
        self._timed_commands: "LaunchCommands | None" = None
        self._qmd_words = array("I", self.qmd_template)
        self._release_fields = qcls.release_fields(0)
        #: byte offset in the QMD of its release payload (the timeline value a launch releases)
        self.payload_off = 4 * self._release_fields[3].index
        self._cb0_lo_off, self._cb0_hi_off = 4 * lo.index, 4 * hi.index
        self._block_B = self.kernargs_size()
        self._shapes: dict[tuple[Sequence[int], Sequence[int]], LaunchShape] = {}
        self._packers: dict[tuple[type, ...], "struct.Struct | None"] = {}
        self._hot: dict[object, "ShapeLauncher | None"] = {}
        self._last_shape: tuple[object, object, ShapeLauncher] = (None, None, None)  # type: ignore
        # Registers are allocated per warp in units of 256 (tinygrad): a CTA must fit the 64K file.
        warp_regs = round_up(max(1, k.registers) * 32, 256)
        self.max_threads = (device.gen.limits.registers_per_sm // warp_regs) // 4 * 4 * 32
        if k.max_threads:
            self.max_threads = min(self.max_threads, k.max_threads)

    # -------------------------------------------------------------- launching
    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: Literal[False] = ..., timeout_ms: float | None = ...) -> None: ...

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: Literal[True], timeout_ms: float | None = ...) -> float: ...

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: bool = ..., timeout_ms: float | None = ...) -> float | None: ...

    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = (),
                 global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 wait: bool = False, timeout_ms: float | None = None) -> float | None:
        """Launches like `Program.__call__`. This is the hot path: the shape's `ShapeLauncher`
        (runtime.drivers.nv.launcher) fills a prebuilt launch slot and rings the doorbell; with
        `wait` it then waits for the launch's timeline value and returns the GPU time from the
        slot's two timestamps (`_wait_hot`). Arguments it cannot pack take the short path
        (`_launch_short`). The launcher of the last shape is found by identity of the size tuples
        (callers pass the same ones)."""
        if self.nvdev.tracer is not None:  # the profiler's hook (the core's Program does too)
            return self.nvdev.tracer.launch(self, args + tuple(vals), global_size, local_size,
                                            wait, timeout_ms)
        last = self._last_shape
        hot: "ShapeLauncher | None"
        if global_size is last[0] and local_size is last[1] and not vals:
            hot = last[2]
        else:
            hot = self._launcher(global_size, local_size, vals)
        if hot is not None and (hot.fn(args) or hot.dispatch(args)):
            return self._wait_hot(timeout_ms) if wait else None
        return self._launch_short(args, vals, global_size, local_size, wait, timeout_ms)

    def _wait_hot(self, timeout_ms: float | None) -> float:
        """Waits for the launch just published through a slot; its GPU time is the QMD release's
        timer (grid complete, written beside the timeline value) minus the slot's progress
        release's timer (SEND_PCAS issued). Nothing else was submitted to the channel in between,
        so the progress word's timer is this launch's."""
        dev = self.nvdev
        tl = dev.timeline_signal
        tl.wait(dev.timeline_value, timeout_ms)
        dev.check_fault()
        return (tl.timestamp - dev.compute_channel.progress.timestamp) / dev.clock_hz

    def _launcher(self, global_size: Sequence[int], local_size: Sequence[int],
                  vals: Sequence[int | float]) -> "ShapeLauncher | None":
        """The shape's launcher (made on first use), or None when the launch takes the short
        path (it has `vals`, the device is unusable, or the sizes are lists)."""
        dev = self.nvdev
        if vals or not dev.may_submit:
            return None
        try:
            hot = self._hot[global_size, local_size]  # type: ignore[index]
        except KeyError:
            hot = self._make_hot(global_size, local_size)
        except TypeError:  # unhashable sizes (lists)
            return None
        if hot is not None:
            self._last_shape = (global_size, local_size, hot)
        return hot

    def _launch_short(self, args: tuple[ArgValue, ...], vals: Sequence[int | float],
                      global_size: Sequence[int], local_size: Sequence[int], wait: bool,
                      timeout_ms: float | None) -> float | None:
        """A launch block from the argument arena and the commands from the pushbuffer template
        (wait for the previous timeline value, cache invalidation, SEND_PCAS, the QMD releasing
        the next value); a launch that waits uses the timed template (`_timed_template`)."""
        dev = self.nvdev
        if dev.timeline_value + 1 > _M32:
            return super().__call__(*args, vals=vals, global_size=global_size,
                                    local_size=local_size, wait=wait, timeout_ms=timeout_ms)
        if vals:
            args = args + tuple(vals)
        dev.check_usable()
        with dev.submit_lock:
            v = self._submit_short(args, global_size, local_size, wait)
        if not wait:
            return None
        self._t1.wait(v, timeout_ms)
        dev.check_fault()
        return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz

    def _submit_short(self, args: tuple[ArgValue, ...], global_size: Sequence[int],
                      local_size: Sequence[int], wait: bool) -> int:
        dev = self.nvdev
        va, view = dev.kernarg_arena().take(self._block_B, 64)
        # The timeline value is taken only once the block is written and the commands accepted: a
        # bad argument must not leave a value that nothing will ever signal.
        v = dev.timeline_value + 1
        qmd_va = self.fill_fast(va, view, args, global_size, local_size, v)
        c = self._timed_template() if wait else self.launch_template()
        words = c.words[:]
        if c.t1 is not None:
            words[c.t1] = v  # the end timestamp's release carries the value waited for
        words[c.acquire] = v - 1
        words[c.qmd] = qmd_va >> 8
        ch = dev.compute_channel
        try:
            ch.submit_one(words)
        except Exception as e:
            dev.note_submit_error(e)
            raise
        dev.timeline_value = v
        ch.set_chain(None if wait else v)  # a timed launch ends with a host release, not the QMD's
        return v

    def _timed_template(self) -> "LaunchCommands":
        """The commands of a launch that waits and is timed, built once (`queue.timeline_launch`
        with the program's t0 and t1 signals): GPU time is t1's timestamp minus t0's."""
        if self._timed_commands is None:
            from runtime.drivers.nv.queue import timeline_launch
            self._timed_commands = timeline_launch(self.nvdev, fenced=False,
                                                   timed=(self._t0, self._t1))
        return self._timed_commands

    def _make_hot(self, global_size: Sequence[int],
                  local_size: Sequence[int]) -> "ShapeLauncher | None":
        """The launcher of one shape (None when the shape is not a pair of tuples, or the
        program's launch block is too large for a slot ring). Validates the shape: raises if bad."""
        from runtime.drivers.nv.launcher import ShapeLauncher, slots_for
        if type(global_size) is not tuple or type(local_size) is not tuple:
            return None
        shape = self.launch_shape(global_size, local_size)
        n = slots_for(self, len(shape.qmd))
        with self.nvdev.submit_lock:
            hot = ShapeLauncher(self, shape, n) if n else None
            if len(self._hot) >= 64:
                self._release_launchers()
            self._hot[global_size, local_size] = hot  # type: ignore[index]
        return hot

    def _release_launchers(self) -> None:
        self._last_shape = (None, None, None)  # type: ignore[assignment]
        for hot in self._hot.values():
            if hot is not None:
                hot.release()
        self._hot.clear()

    def block_template(self, va: int, shape: LaunchShape) -> bytes:
        """A timeline launch block for the 256-aligned address `va` with zeroed parameters and
        payload: the shape's cb0 driver area with the parameter bounds, and its timeline QMD with
        constant bank 0's address."""
        blk = bytearray(self.qmd_offset(va) + len(shape.qmd_timeline))
        self._write_block(memoryview(blk), va, shape.cb0, shape.qmd_timeline)
        return bytes(blk)

    def _write_block(self, view: memoryview, va: int, cb0: bytes, qmd: bytes) -> int:
        """Writes a shape's cb0 driver area (with the parameter bounds for a block at `va`) and
        its QMD (with constant bank 0's address) into `view`; returns the QMD's offset. The
        parameters are left as they are."""
        pb = self.param_base
        view[:pb] = cb0
        struct.pack_into("<QQ", view, self._cb0.param_start, va + pb, va + pb + self.param_size)
        qo = self.qmd_offset(va)
        view[qo:qo + len(qmd)] = qmd
        self._write_cb0_address(view, qo, va)
        return qo

    def _write_cb0_address(self, view: memoryview, qo: int, va: int) -> None:
        """Stores constant bank 0's address `va` into the QMD at `qo`: whole dwords built from the
        template, no read-modify-write (the block may be write-combined device memory)."""
        a = va >> self._cb0_shift
        hi = self._cb0_hi
        hi_word = self._cb0_hi_word | (((a >> 32) & hi.mask) << hi.shift)
        if self._cb0_hi_off == self._cb0_lo_off + 4:  # adjacent dwords (every QMD version)
            _TWO_U32.pack_into(view, qo + self._cb0_lo_off, a & _M32, hi_word)
        else:
            _ONE_U32.pack_into(view, qo + self._cb0_lo_off, a & _M32)
            _ONE_U32.pack_into(view, qo + self._cb0_hi_off, hi_word)

    def fill_fast(self, va: int, view: memoryview, args: Sequence[ArgValue],
                  global_size: Sequence[int], local_size: Sequence[int], v: int) -> int:
        """Writes the launch block of a timeline launch (constant bank 0, the arguments, the QMD
        releasing timeline value `v`) at `va`; returns the QMD's address."""
        if type(global_size) is not tuple or type(local_size) is not tuple:
            global_size, local_size = tuple(global_size), tuple(local_size)
        shape = self._shapes.get((global_size, local_size))
        if shape is None:
            shape = self.launch_shape(global_size, local_size)
        pb = self.param_base
        qo = self._write_block(view, va, shape.cb0, shape.qmd_timeline)
        if len(args) != len(self.slots):
            names = ", ".join(s.name for s in self.slots)
            raise ProgramError(f"{self.name} takes {len(self.slots)} arguments ({names}), got "
                               f"{len(args)}")
        types = tuple(map(type, args))
        if types not in self._packers:
            self._packers[types] = self.packer(types)
        packer = self._packers[types]
        if packer is None:
            kv = view[pb:pb + self.param_size]
            for slot, value in zip(self.slots, args):
                write_arg(kv, slot, value, self.device)
        else:
            vals: list[object] = []
            for slot, a in zip(self.slots, args):
                if type(a) is Buffer:
                    if a.freed or (a.base is not None and a.base.freed) or a.device is not \
                            self.device:
                        write_arg(view[pb:pb + self.param_size], slot, a, self.device)  # raises
                    vals.append(a.va)
                else:
                    vals.append(a)
            try:
                packer.pack_into(view, pb, *vals)
            except (struct.error, OverflowError):  # e.g. an unsigned value in a signed slot,
                # a float beyond a 4-byte slot's range: the careful path names the argument
                kv = view[pb:pb + self.param_size]
                for slot, value in zip(self.slots, args):
                    write_arg(kv, slot, value, self.device)
        _ONE_U32.pack_into(view, qo + self.payload_off, v)
        return va + qo

    def launch_shape(self, global_size: Sequence[int],
                     local_size: Sequence[int]) -> LaunchShape:
        """THE QMD builder: validates a launch shape and builds its cb0 driver area and QMD (from
        the program's templates: grid and block in both), once per shape; every launch route
        writes its block from these (`_write_block`)."""
        if type(global_size) is not tuple or type(local_size) is not tuple:
            global_size, local_size = tuple(global_size), tuple(local_size)
        key = (global_size, local_size)
        shape = self._shapes.get(key)
        if shape is not None:
            return shape
        gsz, lsz = as_tuple3(global_size, "global_size"), as_tuple3(local_size, "local_size")
        self.check_launch(gsz, lsz)
        for (_, _, mask), v in zip(self._launch_packs, (*gsz, *lsz)):
            if v > mask:
                raise ProgramError(f"{self.name}: launch dimension {v} does not fit its "
                                   f"{mask.bit_length()}-bit QMD field")
        cb0 = bytearray(self.cb0_template)
        struct.pack_into("<6I", cb0, self._cb0.block_dim, *lsz, *gsz)
        qmd = bytearray(self.qmd_template)
        for (st, off, _), v in zip(self._launch_packs, (*gsz, *lsz)):
            st.pack_into(qmd, off, v)
        timeline = bytearray(qmd)
        self.write_release(memoryview(timeline), self.nvdev.timeline_signal.va, 0)
        shape = LaunchShape(bytes(cb0), bytes(qmd), bytes(timeline))
        if len(self._shapes) > 64:
            self._shapes.clear()
        self._shapes[key] = shape
        return shape

    def packer(self, types: tuple[type, ...]) -> "struct.Struct | None":
        """One struct that stores all arguments of these types at their slots, or None when some
        argument needs the careful path (bytes, or a type with no fixed format)."""
        fmt, pos = "<", 0
        for slot, t in zip(self.slots, types):
            if slot.offset < pos:
                return None
            fmt += f"{slot.offset - pos}x" if slot.offset > pos else ""
            if slot.kind == "buffer" and t is not Buffer and not (
                    t is int or issubclass(t, np.integer)):
                return None  # a float for a pointer: the careful path refuses it
            if t is Buffer and slot.size == 8:
                fmt += "Q"
            elif (t is int or issubclass(t, np.signedinteger)) and slot.size in (1, 2, 4, 8):
                fmt += {1: "b", 2: "h", 4: "i", 8: "q"}[slot.size]
            elif issubclass(t, np.unsignedinteger) and slot.size in (1, 2, 4, 8):
                # a value that does not fit raises struct.error: the careful path decides
                fmt += {1: "B", 2: "H", 4: "I", 8: "Q"}[slot.size]
            elif (t is float or issubclass(t, np.floating)) and slot.size in (2, 4, 8):
                fmt += {2: "e", 4: "f", 8: "d"}[slot.size]
            else:
                return None
            pos = slot.offset + slot.size
        return struct.Struct(fmt)

    def launch_words(self, kargs: "NVKernArgs", v: int) -> array:
        """The commands of one timeline launch (wait for v - 1, launch, release v from the QMD) and
        the QMD's release fields, from the template."""
        tl = self.nvdev.timeline_signal
        self.write_release(kargs.qmd, tl.va, v)
        c = self.launch_template()
        words = c.words[:]
        words[c.acquire] = (v - 1) & _M32
        words[c.qmd] = (kargs.va + self.qmd_offset(kargs.va)) >> 8
        return words

    def launch_template(self) -> "LaunchCommands":
        """The commands of a timeline launch with zeroed payloads (`queue.timeline_launch`
        without fence: the acquire orders it), built once."""
        if self._short_commands is None:
            from runtime.drivers.nv.queue import timeline_launch
            self._short_commands = timeline_launch(self.nvdev, fenced=False)
        return self._short_commands

    # -------------------------------------------------------------- launch block
    def qmd_offset(self, block_va: int) -> int:
        """Offset of the QMD inside a launch block at `block_va` (256-B aligned address)."""
        return round_up(block_va + self.cb0_B, 256) - block_va

    def kernargs_size(self) -> int:
        return self.cb0_B + 255 + self.qmd_class.size_B

    def check_early_start(self, what: str) -> None:
        """A PTX kernel (the module's text is kept) must contain `griddepcontrol.wait` in its
        body or in a device function it calls (directly or through others); a cubin's promise
        is taken on trust (its machine code is not searched). Whether the instruction is reached
        on every path is not decided: it only has to be there."""
        mod = self.ptx_module
        if mod is None or self.name not in mod.entries:
            return
        spans = [mod.entries[self.name].body]
        seen: set[str] = set()
        found = False
        while spans and not found:
            a, b = spans.pop()
            body = mod.text[a:b]
            found = "griddepcontrol.wait" in body
            for m in _PTX_CALL.finditer(body):
                f = mod.funcs.get(m.group(1))
                if f is not None and f.body is not None and f.name not in seen:
                    seen.add(f.name)
                    spans.append(f.body)
        if not found:
            raise ProgramError(f"{what}: kernel {self.name} has early_start=True but never calls "
                               "griddepcontrol.wait (cudaGridDependencySynchronize): call it "
                               "before reading what the previous launch wrote, or drop "
                               "early_start")

    def check_launch(self, global_size: Sequence[int], local_size: Sequence[int]) -> None:
        """Rejects launch shapes the hardware cannot run (or the cubin forbids)."""
        lim = self.nvdev.gen.limits
        lx, ly, lz = local_size
        threads = lx * ly * lz
        if any(v > m for v, m in zip(local_size, lim.max_block)) or \
                threads > lim.max_block_threads:
            raise ProgramError(f"{self.name}: block {tuple(local_size)} exceeds {lim.max_block} "
                               f"/ {lim.max_block_threads} threads")
        if threads > self.max_threads:
            raise ProgramError(f"{self.name}: {threads} threads per block, but with "
                               f"{self.kernel.registers} registers per thread at most "
                               f"{self.max_threads} fit")
        req = self.kernel.reqntid
        if req and tuple(req) + (1,) * (3 - len(req)) != tuple(local_size):
            raise ProgramError(f"{self.name}: the kernel requires block {tuple(req)} "
                               f"(EIATTR_REQNTID), got {tuple(local_size)}")
        if any(v > m for v, m in zip(global_size, lim.max_grid)):
            raise ProgramError(f"{self.name}: grid {tuple(global_size)} exceeds {lim.max_grid}")

    def _fill_block(self, va: int, view: memoryview, global_size: tuple[int, int, int],
                    local_size: tuple[int, int, int]) -> KernArgs:
        shape = self.launch_shape(global_size, local_size)
        # Stores only (no read-modify-write): the block may be write-combined device memory.
        qo = self._write_block(view, va, shape.cb0, shape.qmd)
        pb, qsz = self.param_base, len(shape.qmd)
        return NVKernArgs(va, view[pb:pb + self.param_size], self.slots, self.device,
                          view[qo:qo + qsz])

    def write_release(self, qmd: memoryview, addr: int, payload: int) -> None:
        """Enables the QMD's release semaphore 0 (`payload` to `addr` when the grid completes),
        writing whole dwords computed from the template (the QMD may sit in write-combined memory,
        which is slow to read back)."""
        words: dict[int, int] = {}
        for f, v in zip(self._release_fields, (1, addr & _M32, addr >> 32, payload & _M32,
                                               payload >> 32)):
            if v > f.mask:
                raise ProgramError(f"release value {v:#x} does not fit its QMD field")
            w = words.get(f.index, self._qmd_words[f.index])
            words[f.index] = (w & ~(f.mask << f.shift) & _M32) | (v << f.shift)
        for idx, w in words.items():
            struct.pack_into("<I", qmd, 4 * idx, w)

    def free(self) -> None:
        """Releases the code memory (the caller makes sure no launch is still running)."""
        self._release_launchers()
        self.device.free(self.lib_buf)
        self._t0.release()
        self._t1.release()


# a PTX call's callee: `call[.uni] [(ret),] name[, (args)];`
_PTX_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$%][\w$]*)")
_ONE_U32 = struct.Struct("<I")
_TWO_U32 = struct.Struct("<II")
_PACK = {(0xFFFFFFFF, 0): "<I", (0xFFFF, 0): "<H", (0xFFFF, 16): "<H", (0xFF, 0): "<B",
         (0xFF, 8): "<B", (0xFF, 16): "<B", (0xFF, 24): "<B"}


def _field_fmt(f: DwordField) -> str:
    """The struct format that stores a launch field whole (they are byte aligned and byte sized
    in every QMD version, so a launch writes them without reading the QMD back)."""
    fmt = _PACK.get((f.mask, f.shift))
    if fmt is None:
        raise ProgramError(f"QMD field at dword {f.index} bit {f.shift} is not byte aligned")
    return fmt
