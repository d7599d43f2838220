"""The NVIDIA launch hot path: per-shape rings of prebuilt launch slots, and the one description of
a launch that both of its executors follow.

A launch of a program with a given grid and block (a "shape") that does not wait goes through a
`ShapeLauncher`. It owns a chunk of CPU-visible VRAM holding N slots, each a complete launch block
(the shape's cb0 driver area and timeline QMD from `NVProgram.launch_shape`, the one QMD builder,
written by `NVProgram.block_template`) and a command segment (`queue.timeline_launch(fenced=True)`,
the one command sequence of a timeline launch), both written once with every address they need:

    acquire timeline >= v-1 | LAUNCH FENCE | INVALIDATE_SHADER_CACHES | SEND_PCAS(QMD) | progress

Where each launch writes is data computed once (`SlotLayout`). What a launch does, in order:

  1. arguments: the types match the specialization; buffers are live and of this device; every
     value packs into its slot (else decline: the careful path raises the right error);
  2. admission: the device may submit (`DEVICE_WORDS` blocked is clear, and no other thread is
     building a submission), v = timeline value + 1 and seq = channel seq + 1 fit 32 bits, the
     next slot's previous launch is complete (its value <= the timeline signal), one GPFIFO entry
     is free (else decline; `ShapeLauncher.dispatch` makes room and tries again);
  3. the slot's stores: the parameters, the QMD's release payload v, the progress payload seq;
     then the dependency: when the channel's last launch released v-1 (`chain_value`), the entry
     starts at the LAUNCH FENCE (`entry_chained`: the channel's order and the fence imply v-1);
     otherwise the acquire's payload v-1 is stored and the entry starts at the acquire;
  4. the books: chain value v, timeline value v, the slot's value v, the next slot;
  5. publish (`Channel.publish`): GPFIFO entry, in-flight record, seq, GP_PUT, USERD GP_PUT,
     store fence, doorbell. A failure of the doorbell (the mock's fault report) becomes the
     device's fault (`Device.note_submit_error`).

A declined launch has stored nothing the GPU reads. The executors: `ShapeLauncher._python` and
_nvlaunch.c's `launch` (the accelerator, used where it can be built and `NVDevice.launch_native`
is set; HCQ_NATIVE=0 turns it off everywhere). They share the channel's and the device's state
words (gpfifo.CHANNEL_WORDS, DEVICE_WORDS) and the launcher's slot words, and leave the same bytes
in the same places (tests/runtime/test_nv_launch_paths.py runs one script of launches both ways).

The launch fence is `NVComputeQueue.launch_fence` (queue.py): the segments get it from
`timeline_launch`, queues and graph bodies from `exec`; changing how a dependent launch waits for
the one before it is a change there (and in `NVProgram.launch_shape` for QMD-side mechanisms).

When the previous timeline value was released by this compute channel's own launch (the usual
case: launch after launch), the GPFIFO entry skips the acquire and starts at the fence: the
channel's own completion order already implies v-1, and the acquire's poll of system memory costs
about a microsecond on the H200 (scripts/nv_latency_probe.py measures it). A slot is reused only
once the timeline shows its previous launch complete; the PCAS action invalidates any copy of the
QMD the GPU cached, and the QMD invalidates constant bank 0, so rewritten slots are read afresh.

A launch that waits takes the same slots: the progress release writes the front end's timer beside
the sequence number when SEND_PCAS has been issued, and the QMD's release of the timeline (a
four-word semaphore, the QMD's default structure) writes the timer when the grid completes, so the
GPU time of the launch is the difference of the two, with no extra commands or wait for idle.
"""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

import numpy as np
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from runtime.drivers.nv.gpfifo import (_GP_PUT_DW, BLOCKED, CHAIN_VALUE, CHANNEL_WORDS,
                                       DEVICE_WORDS, GP_FREE_UNTIL, GP_PUT, SEM_PAYLOAD_LO_DW, SEQ,
                                       TIMELINE_VALUE)
from runtime.drivers.nv.methods import gp_entry
from runtime.hcq import native
from runtime.hcq.device import SubmitLock
from runtime.hcq.memory import Buffer, MemKind, SlotPool, round_up
from runtime.hcq.seam import MappedDoorbell

if TYPE_CHECKING:
    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.gpfifo import Channel
    from runtime.drivers.nv.program import LaunchShape, NVProgram
    from runtime.hcq.program import ArgValue

_M32 = 0xFFFFFFFF
CHUNK_B = 64 << 10          # one shape's slots and segments
BACKING_B = 2 << 20         # VRAM carved into chunks
MAX_SLOTS = 32
MIN_SLOTS = 4
SEGMENT_STRIDE_B = 128
NATIVE_ABI = 8             # _nvlaunch.c's ABI: the make() settings and the shared words
# Argument kinds of the native launch (_nvlaunch.c's enum), by (Python type, slot size): the
# ranges of the formats `NVProgram.packer` gives the Python launch (signed for ints and numpy
# signed integers, unsigned for numpy unsigned ones).
_NATIVE_KINDS = {(Buffer, 8): 0, (int, 1): 1, (int, 2): 2, (int, 4): 3, (int, 8): 4,
                 (float, 4): 5, (float, 8): 6}
_NATIVE_UNSIGNED = {1: 7, 2: 8, 4: 9, 8: 10}


def _native_kind(t: type, size: int) -> int | None:
    """The native argument kind of a Python or numpy scalar type in a slot of `size` bytes (numpy
    integers of any width as their value, numpy floats as Python floats), or None."""
    k = _NATIVE_KINDS.get((t, size))
    if k is None and issubclass(t, np.unsignedinteger):
        k = _NATIVE_UNSIGNED.get(size)
    elif k is None and issubclass(t, np.integer):
        k = _NATIVE_KINDS.get((int, size))
    elif k is None and issubclass(t, np.floating):
        k = _NATIVE_KINDS.get((float, size))
    return k


class ChunkPool:
    """Fixed-size chunks of CPU-visible VRAM for launch slots, carved from 2 MiB buffers."""

    def __init__(self, device: "NVDevice") -> None:
        self.device = device
        self.pools: list[SlotPool] = []

    def take(self) -> tuple[Buffer, int]:
        """A free chunk: (its backing buffer, byte offset)."""
        for pool in self.pools:
            if pool.free_count:
                return pool.buf, pool.take()
        buf = self.device.alloc(BACKING_B, kind=MemKind.VRAM, cpu_access=True)
        pool = SlotPool(buf, CHUNK_B)
        self.pools.append(pool)
        return buf, pool.take()

    def give(self, buf: Buffer, offset: int) -> None:
        """Returns a chunk from `take` (the caller made sure the GPU is done with it)."""
        for pool in self.pools:
            if pool.buf is buf:
                pool.give(offset)
                return


def native_helper() -> ModuleType | None:
    """The compiled launch helper (_nvlaunch.c): the extension module built with the wheel when
    it matches the source beside it, else built on demand from that source (a development
    checkout); None where neither is possible (the reason is in
    `runtime.hcq.native.unavailable["runtime.drivers.nv._nvlaunch"]`, and a warning says so
    once). A module whose shared state layout differs from gpfifo's is refused."""
    mod = native.load("runtime.drivers.nv._nvlaunch", Path(__file__).with_name("_nvlaunch.c"),
                      fallback="NVIDIA launches take the pure-Python path (several times slower)")
    if mod is not None and (getattr(mod, "ABI", None) != NATIVE_ABI
                            or tuple(mod.CHANNEL_WORDS) != CHANNEL_WORDS
                            or tuple(mod.DEVICE_WORDS) != DEVICE_WORDS
                            or getattr(mod, "LOCK_HELD", None) != SubmitLock.HELD):
        native.unavailable["runtime.drivers.nv._nvlaunch"] = \
            "its shared state layout differs from runtime/drivers/nv/gpfifo.py's"
        return None
    return mod


def _never(args: "tuple[ArgValue, ...]") -> bool:
    return False


def _doorbell(ch: "Channel") -> tuple[Any, int, int, int]:
    """(target, index, width, token) of a channel's doorbell for the launch code: a mapped
    doorbell's view, stored to directly (what MappedDoorbell.ring does, minus a call), or the
    doorbell's `ring` to call (the mock GPU's)."""
    db = ch.doorbell
    if type(db) is MappedDoorbell:
        view, index = db.store_target()
        return view, index, db.width, ch.token & ((1 << (8 * db.width)) - 1)
    return db.ring, 0, 4, ch.token


@dataclass(frozen=True)
class SlotLayout:
    """Where the launches of one `ShapeLauncher` write, in its backing buffer's CPU view: byte
    offsets of each slot's parameters, dword indices of the payloads a launch patches, and each
    slot's two GPFIFO entries. Both executors take exactly these (the C helper as `make`'s
    settings of the same names)."""

    param_offs: tuple[int, ...]      # byte offset of slot i's parameter area
    payload_idx: tuple[int, ...]     # dword: its QMD's release payload (the timeline value v)
    acquire_idx: tuple[int, ...]     # dword: its segment's acquire payload (v - 1)
    seq_idx: tuple[int, ...]         # dword: its segment's progress payload (the sequence number)
    entry_acquire: tuple[int, ...]   # GPFIFO entry of the whole segment
    entry_chained: tuple[int, ...]   # GPFIFO entry from the launch fence on


class ShapeLauncher:
    """Launches of one program with one grid and block (module docstring). `fn(args)` is the
    launch specialized for the last argument types seen; it returns False, having changed nothing
    the GPU sees, when the arguments need another specialization (`dispatch`) or the careful
    path."""

    def __init__(self, prg: "NVProgram", shape: "LaunchShape", n_slots: int) -> None:
        from runtime.drivers.nv.queue import timeline_launch
        dev = prg.nvdev
        self.prg, self.device = prg, dev
        self.fn: Callable[[tuple[ArgValue, ...]], bool] = _never
        self._specs: dict[tuple[type, ...], Callable[..., bool] | None] = {}
        self.n = n_slots
        self.buf, self.chunk_off = dev.launch_chunks.take()
        # Timeline value each slot's last launch releases, then the next slot's index.
        self.state = array("Q", [0] * (n_slots + 1))
        qo = self.qo = prg.qmd_offset(0)
        stride = block_stride(prg, len(shape.qmd_timeline))
        seg0 = n_slots * stride
        base = self.buf.va + self.chunk_off
        view = self.buf.cpu_view()[self.chunk_off:self.chunk_off + CHUNK_B]
        cmds = timeline_launch(dev, fenced=True, progress=dev.compute_channel.progress)
        segment = cmds.words
        n_dw = len(segment)
        assert n_dw * 4 <= SEGMENT_STRIDE_B and cmds.progress is not None
        assert (qo + prg.payload_off) % 4 == 0
        self.block_offs: list[int] = []
        lay: dict[str, list[int]] = {f: [] for f in SlotLayout.__dataclass_fields__}
        words = self.buf.cpu_view().cast("I")
        for i in range(n_slots):
            boff = i * stride
            bva = base + boff
            view[boff:boff + qo + len(shape.qmd_timeline)] = prg.block_template(bva, shape)
            soff = seg0 + i * SEGMENT_STRIDE_B
            seg = segment[:]
            seg[cmds.qmd] = (bva + qo) >> 8
            w0 = (self.chunk_off + soff) // 4
            words[w0:w0 + n_dw] = seg
            self.block_offs.append(self.chunk_off + boff)
            lay["param_offs"].append(self.chunk_off + boff + prg.param_base)
            lay["payload_idx"].append((self.chunk_off + boff + qo + prg.payload_off) // 4)
            lay["acquire_idx"].append(w0 + cmds.acquire)
            lay["seq_idx"].append(w0 + cmds.progress)
            lay["entry_acquire"].append(gp_entry(base + soff, n_dw))
            lay["entry_chained"].append(gp_entry(base + soff + 4 * cmds.fence, n_dw - cmds.fence))
        self.layout = SlotLayout(**{k: tuple(v) for k, v in lay.items()})

    def block_va(self, i: int) -> int:
        """GPU address of slot `i`'s launch block."""
        return self.buf.va + self.block_offs[i]

    def segment_va(self, i: int) -> int:
        """GPU address of slot `i`'s command segment (its acquire)."""
        return self.buf.va + 4 * (self.layout.acquire_idx[i] - SEM_PAYLOAD_LO_DW)

    # ------------------------------------------------------------------ dispatch
    def dispatch(self, args: "tuple[ArgValue, ...]") -> bool:
        """Finds (or makes) the specialization for these argument types and launches with it,
        first making room (waiting for the next slot's previous launch, or for GPFIFO space)
        when the specialization declines for lack of it."""
        dev = self.device
        if not dev.may_submit:
            return False  # the short path raises the device's error
        types = tuple(map(type, args))
        fn = self._specs[types] if types in self._specs else self._specialize(types)
        if fn is None:
            return False
        self.fn = fn
        if fn(args):
            return True
        self._make_room()
        return fn(args)

    def _make_room(self) -> None:
        dev, ch = self.device, self.device.compute_channel
        st = self.state
        busy = st[st[self.n]]
        if busy > dev.timeline_signal.value:
            dev.timeline_signal.wait(busy)
        if not ch.has_entry_space():
            try:
                ch.wait_space(ch.pb_put, 1)
            except Exception as e:
                dev.note_submit_error(e)
                raise

    def _specialize(self, types: tuple[type, ...]) -> "Callable[..., bool] | None":
        """The launch for arguments of these types: the native one (runtime/drivers/nv/
        _nvlaunch.c) when it is available and handles every argument, else the Python one. Either
        declines (returns False, having stored nothing the GPU reads) when an argument does not
        pack or is a freed buffer, the slot or the ring is busy, or a value outgrows 32 bits."""
        prg = self.prg
        p = prg.packer(types) if len(types) == len(prg.slots) else None
        fn = None
        if p is not None:
            fn = self._native(types) if self.device.launch_native else None
            if fn is None:
                fn = self._python(types, p)
        self._specs[types] = fn
        return fn

    def _native(self, types: tuple[type, ...]) -> "Callable[..., bool] | None":
        """The launch of the module docstring by _nvlaunch.c, given the same layout and state."""
        kinds = []
        for slot, t in zip(self.prg.slots, types):
            k = _native_kind(t, slot.size)
            if k is None:
                return None
            kinds.append(k)
        mod = native_helper()
        if mod is None:
            return None
        dev = self.device
        ch = dev.compute_channel
        bell, index, width, token = _doorbell(ch)
        # Fresh views ([:]) for the helper to hold: its buffer exports then never stop the
        # device's own views from being released when the device closes.
        if isinstance(bell, memoryview):
            bell = bell[:]
        lay = self.layout
        return mod.make(  # type: ignore[no-any-return]
            chunk=self.buf.cpu_view()[:], slots=self.state, device_words=dev.words,
            channel_words=ch.state, records=ch.records, timeline=dev.timeline_signal.value_view[:],
            ring=ch.ring[:], userd=ch.userd[:], doorbell=bell, n_slots=self.n,
            entries=ch.entries, gp_put_dw=_GP_PUT_DW, token=token, doorbell_index=index,
            doorbell_width=width, param_offs=lay.param_offs, payload_idx=lay.payload_idx,
            acquire_idx=lay.acquire_idx, seq_idx=lay.seq_idx, entry_acquire=lay.entry_acquire,
            entry_chained=lay.entry_chained, kinds=tuple(kinds),
            arg_offs=tuple(s.offset for s in self.prg.slots), buffer_type=Buffer, owner=dev,
            on_error=dev.note_submit_error, types=types)

    def _python(self, types: tuple[type, ...], p: struct.Struct) -> "Callable[..., bool]":
        """The launch of the module docstring in Python, on the same layout and state as the
        native one (steps numbered as there)."""
        dev = self.device
        ch = dev.compute_channel
        nargs = len(types)
        buffers = tuple(i for i, t in enumerate(types) if t is Buffer)
        pack, psize = p.pack, p.size
        amv = self.buf.cpu_view()
        words = amv.cast("I")
        lay = self.layout
        poffs, payw, acq, seqs = lay.param_offs, lay.payload_idx, lay.acquire_idx, lay.seq_idx
        ent_a, ent_c = lay.entry_acquire, lay.entry_chained
        st, n, nmask = self.state, self.n, self.n - 1
        dw, cs, tlv = dev.words, ch.state, dev.timeline_signal.value_view
        publish = ch.publish
        guard = dev.submit_lock

        def launch(args: "tuple[ArgValue, ...]") -> bool:
            # Unlike the native launch (which the GIL keeps whole), Python may switch threads
            # between these stores: take the device's submission lock.
            with guard:
                return launch_locked(args)

        def launch_locked(args: "tuple[ArgValue, ...]") -> bool:
            # 1. arguments
            if len(args) != nargs or tuple(map(type, args)) != types:
                return False
            if buffers:
                vals = list(args)
                for k in buffers:
                    bf: Buffer = args[k]  # type: ignore[assignment]
                    if bf.freed or (bf.base is not None and bf.base.freed) or bf.device is not dev:
                        return False  # the careful path raises the buffer's error
                    vals[k] = bf.va
            else:
                vals = args  # type: ignore[assignment]
            try:  # packed aside: a value that does not fit leaves the slot untouched
                data = pack(*vals)
            except (struct.error, OverflowError):  # the careful path names the argument
                return False
            # 2. admission
            if dw[BLOCKED] & ~guard.HELD:
                return False
            v = dw[TIMELINE_VALUE] + 1
            seq = cs[SEQ] + 1
            if v > _M32 or seq > _M32:
                return False
            i = st[n]
            if st[i] > tlv[0] or cs[GP_PUT] >= cs[GP_FREE_UNTIL]:
                return False
            # 3. the slot's stores, and the dependency
            o = poffs[i]
            amv[o:o + psize] = data
            words[payw[i]] = v
            words[seqs[i]] = seq
            if cs[CHAIN_VALUE] == v - 1:
                entry = ent_c[i]
            else:
                words[acq[i]] = v - 1
                entry = ent_a[i]
            # 4. the books
            cs[CHAIN_VALUE] = v
            dw[TIMELINE_VALUE] = v
            st[i] = v
            st[n] = (i + 1) & nmask
            # 5. publish
            try:
                publish(seq, entry)
            except Exception as e:
                dev.note_submit_error(e)
                raise
            return True

        return launch

    # ------------------------------------------------------------------ lifetime
    def release(self) -> None:
        """Waits until the slots' launches are complete and returns the chunk to the pool."""
        dev = self.device
        self.fn = _never
        if dev.closed:
            return
        last = max(self.state[:self.n])
        if last and dev.may_submit:
            dev.timeline_signal.wait(last)
        dev.launch_chunks.give(self.buf, self.chunk_off)


def block_stride(prg: "NVProgram", qmd_B: int) -> int:
    """Bytes between a program's launch slots: cb0 up to the 256-aligned QMD, then the QMD."""
    return round_up(prg.qmd_offset(0) + qmd_B, 256)


def slots_for(prg: "NVProgram", qmd_B: int) -> int:
    """How many of the program's slots (plus a segment each) a chunk holds, as a power of two; 0
    when fewer than MIN_SLOTS fit (such programs take the short path)."""
    fit = min(MAX_SLOTS, CHUNK_B // (block_stride(prg, qmd_B) + SEGMENT_STRIDE_B))
    if fit < MIN_SLOTS:
        return 0
    return 1 << (fit.bit_length() - 1)
