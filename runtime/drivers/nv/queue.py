"""NVIDIA command builders: the compute queue (the generation's compute class on subchannel 1) and the
copy queue (its copy class on subchannel 4), both with the host class's semaphores. Compute and copy
methods come from the device's generation record (`NVDevice.gen`, runtime/drivers/nv/generation.py).

- wait: host SEM_EXECUTE ACQ_CIRC_GEQ with a 64-bit payload (the channel stalls until value >= v)
  and ACQUIRE_SWITCH_TSG (while unmet, the channel group leaves the engine to other groups, such
  as other processes', instead of polling through its timeslice).
- signal: compute, right after a launch of this queue with a 32-bit value: the QMD's own release
  semaphore (written when the grid completes, no wait-for-idle in the channel); otherwise a host
  release with WFI and a timestamp (payload at +0, GPU time in ns at +8, as `Signal` lays them out).
  Copy: the copy engine's semaphore (FLUSH_ENABLE, four-word release: 32-bit payload and timestamp).
- exec: SEND_PCAS_A = QMD address >> 8, then SEND_SIGNALING_PCAS2_B with the device's PCAS action
  (`send_pcas`). Ordered launches that follow one another in a queue are separated by the launch
  fence (`NVComputeQueue.launch_fence`: the compute class's WAIT_FOR_IDLE), so a queue runs its
  kernels in order, as a CUDA stream does; unordered ones (`ordered=False`) are sent without it
  and may overlap.
- barrier: the launch fence and INVALIDATE_SHADER_CACHES_NO_WFI.
- exec_after: the predecessor's QMD names this launch's QMD as a dependent with action SCHEDULE
  (the QMD has one slot on V03, two from V04): when the predecessor's grid completes, the compute
  engine starts this one itself, with no command in the pushbuffer and no drain of the engine
  (the cheapest correct mechanism scripts/probe_nv_deps.py found; docs/benchmarks.md has figures).
  With no free slot, or a predecessor this queue did not launch, it falls back to a barrier.
  As CUDA's graphs do on Hopper, a grid that starts successors this way completes with a GPU-scope
  barrier and task chasing (`QMD.order_for_successors`: L1_MEMBAR, measured faster than the
  system-scope one only together with task chasing), unless it releases a semaphore; every other
  grid, and so the last of a chain, keeps the system-scope barrier (L1_SYSMEMBAR), which the
  host's view of the results relies on.
- copy: OFFSET_IN/OUT, LINE_LENGTH_IN, LAUNCH_DMA (pitch to pitch, virtual addresses,
  non-pipelined), in chunks of at most 2 GiB.
- call: a bound queue's commands become their own GPFIFO entry (a pushbuffer cannot call another).
"""
from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from hcq_bindings.nv import classes as cl

from runtime.drivers.nv.gpfifo import (SEM_ACQUIRE_GEQ_64, SEM_PAYLOAD_LO_DW, SEM_RELEASE_TS,
                                       SEM_RELEASE_WFI_TS, Channel, host_semaphore)
from runtime.drivers.nv.methods import (SUBC_COMPUTE, SUBC_COPY, fget, gp_entry, hi32, lo32,
                                        nvm)
from runtime.drivers.nv.program import NVKernArgs
from runtime.hcq.errors import QueueError
from runtime.hcq.memory import Buffer, MemKind
from runtime.hcq.program import KernArgs
from runtime.hcq.queue import HWQueue, NativeReplay, Value, Var, as_tuple3, check_fill

if TYPE_CHECKING:
    from typing import Self

    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.program import NVProgram
    from runtime.hcq.signal import Signal

_M32 = 0xFFFFFFFF
MAX_COPY_CHUNK_B = 1 << 31
HEAD_WAIT_DW = len(host_semaphore(0, 0, SEM_ACQUIRE_GEQ_64))  # a wait's dwords (`wait`)


def _drains(execute: int) -> bool:
    """Whether a host SEM_EXECUTE is a release that waits for idle first (the engine is drained
    when it lands)."""
    return fget(cl.NVC56F_SEM_EXECUTE_OPERATION, execute) == \
        cl.NVC56F_SEM_EXECUTE_OPERATION_RELEASE and \
        fget(cl.NVC56F_SEM_EXECUTE_RELEASE_WFI, execute) == cl.NVC56F_SEM_EXECUTE_RELEASE_WFI_EN


class NVQueue(HWQueue):
    """What both NVIDIA queues share: host semaphores, binding, calls, submission."""

    def __init__(self, device: "NVDevice", channel: Channel) -> None:
        super().__init__(device)
        self.device: NVDevice = device
        self.channel = channel
        self._calls: list[tuple[int, NVQueue]] = []   # (dword position, bound body)
        self._bound_buf: Buffer | None = None
        # the addend of a wait for (variable + addend) on the device's timeline that opens the
        # queue, None without one: a laid-out resubmission leaves it out when it is met already
        self._head_wait: int | None = None

    # -------------------------------------------------------------- the stream
    @property
    def words(self) -> array:
        """The commands built so far, as the array the queue appends to (templates read positions
        in it; `dwords()` is a copy)."""
        return self._d

    @property
    def bound_va(self) -> int | None:
        """GPU address of the commands' bound copy (`bind`), None while not bound."""
        return None if self._bound_buf is None else self._bound_buf.va

    # -------------------------------------------------------------- host semaphores
    def host_semaphore(self, va: int, payload: int, execute: int) -> "Self":
        """One host SEM_EXECUTE method as given (`gpfifo.SEM_*`: release, acquire, with or without
        wait for idle and timestamp); its payload's low dword is `SEM_PAYLOAD_LO_DW` words in.
        For launch templates, whose payloads are patched per launch."""
        self._d.extend(host_semaphore(va, payload, execute))
        self._after_host_method(drained=_drains(execute))
        return self

    def wait(self, sig: "Signal", value: Value) -> "Self":
        """Host acquire: stall the channel until the 64-bit value at `sig` >= `value`."""
        val, var, add = self._resolve(value)
        n = len(self._d)
        self._d.extend(host_semaphore(self._sig_va(sig), val, SEM_ACQUIRE_GEQ_64))
        if var is not None:
            self._patch(var, add, n + 3, n + 4)
            if n == 0 and sig is self.device.timeline_signal:
                self._head_wait = add
        self._after_host_method(drained=False)
        return self

    def _host_release(self, sig: "Signal", value: Value) -> None:
        val, var, add = self._resolve(value)
        n = len(self._d)
        self._d.extend(host_semaphore(self._sig_va(sig), val, SEM_RELEASE_WFI_TS))
        if var is not None:
            self._patch(var, add, n + 3, n + 4)
        self._d.extend(nvm(0, cl.NVC56F_NON_STALL_INTERRUPT, 0))
        self._after_host_method(drained=True)

    def _after_host_method(self, drained: bool, launches: bool = False) -> None:
        """Hook: the compute queue forgets its last launch (a later signal may not fold into it).
        `drained`: the method waited for idle (a release with WFI), so earlier launches are done;
        otherwise (an acquire, a call) a later launch must still wait for them, and for those of
        the called commands (`launches`)."""

    # -------------------------------------------------------------- binding and calls
    def call(self, body: HWQueue) -> "Self":
        """Executes a bound queue's commands (their own GPFIFO entry) at this point."""
        if not isinstance(body, NVQueue) or body.bound_va is None:
            raise QueueError("call() needs an NVIDIA queue that was bound with bind()")
        if body.channel is not self.channel:
            raise QueueError(f"a {body.channel.name} command buffer cannot run on the "
                             f"{self.channel.name} channel")
        self._calls.append((len(self._d), body))
        self._after_host_method(drained=False, launches=True)
        return self

    def bind(self) -> "Self":
        """Copies the commands into GPU memory: a later submit (or call) points a GPFIFO entry at
        them instead of copying, and patches write straight into the bound copy."""
        if self._calls:
            raise QueueError("a queue that calls other command buffers cannot be bound")
        n = len(self._d)
        if n == 0:
            raise QueueError("cannot bind an empty queue")
        self.unbind()
        buf = self.device.alloc(n * 4, kind=MemKind.VRAM, cpu_access=True)
        view = buf.cpu_view().cast("I")
        view[:n] = self._d
        self._bound_buf, self._bound = buf, view
        return self

    def unbind(self) -> None:
        if self._bound_buf is not None:
            self._bound = None
            if not self.device.closed:
                self.device.free(self._bound_buf)
            self._bound_buf = None

    def _parts(self) -> list[array | tuple[int, int]]:
        if self._bound_buf is not None:
            return [(self._bound_buf.va, len(self._d))]
        parts: list[array | tuple[int, int]] = []
        start = 0
        for pos, body in self._calls:
            if pos > start:
                parts.append(self._d[start:pos])
            assert body.bound_va is not None
            parts.append((body.bound_va, len(body)))
            start = pos
        if start < len(self._d) or not parts:
            parts.append(self._d[start:])
        return parts

    def describe_commands(self) -> list[str]:
        """The methods of the queue's own words, decoded (calls of bound queues show as their
        GPFIFO entries only)."""
        from runtime.drivers.nv.methods import decode_pushbuffer
        dev = self.device
        return decode_pushbuffer(self._d, {SUBC_COMPUTE: dev.compute_class,
                                           SUBC_COPY: dev.dma_class}, limit=256)

    def _submit(self) -> None:
        for _, body in self._calls:
            if body.bound_va is None:
                raise QueueError("a called command buffer was unbound before submission")
        self.channel.submit(self._parts())

    def resubmitter(self, var: Var) -> Callable[[int], None]:
        """`HWQueue.resubmitter`: the GPFIFO entries are laid out once (`Channel.submit_spans`),
        so a resubmission patches the variable's dwords, copies the queue's own words into the
        pushbuffer in one block and writes the entries. A queue that opens with a wait for the
        variable (plus or minus a constant) on the device's timeline leaves that wait out of a
        resubmission whose value the timeline has reached already. Bound queues, and queues with
        other variables, take the base's route."""
        if not self._laid_out(var):
            return super().resubmitter(var)
        spans, calls = self._spans()
        dev, channel, words, vals = self.device, self.channel, self._d, self._vals
        head = self._head_wait
        tlv = dev.timeline_signal.value_view
        patches = [(p.lo, p.hi, p.add, p.max_bits) for p in self._patches]

        def resubmit(value: int) -> None:
            dev.check_usable()
            for k, (i, body, va) in enumerate(calls):
                if body.bound_va != va:
                    if body.bound_va is None:
                        raise QueueError("a called command buffer was unbound before "
                                         "submission")
                    spans[i] = (1, gp_entry(body.bound_va, len(body)), 0)
                    calls[k] = (i, body, body.bound_va)
            for lo, hi, add, bits in patches:  # checked first: a refused value writes nothing
                v = value + add
                if v < 0 or v >> bits:
                    raise QueueError(f"value {v:#x} of {var.name}{add:+d} does not fit the "
                                     f"{bits}-bit field it patches")
            for lo, hi, add, bits in patches:  # what `update` writes
                v = value + add
                words[lo] = v & _M32
                if hi >= 0:
                    words[hi] = v >> 32
            vals[var] = value
            # A timeline value the GPU has reached already needs no wait: the work it orders
            # after is complete (the CPU has seen its release), so the acquire is left out.
            skip = HEAD_WAIT_DW if head is not None and tlv[0] >= value + head else 0
            try:
                channel.submit_spans(words, spans, skip)
            except Exception as e:  # a fault noticed while submitting poisons the device
                dev.note_submit_error(e)
                raise

        return resubmit

    def _laid_out(self, var: Var) -> bool:
        """Whether resubmissions of `var` can be laid out once: the queue is not bound, and
        `var` is its only variable."""
        return self._bound_buf is None and all(p.var is var for p in self._patches)

    def _spans(self) -> "tuple[list[tuple[int, int, int]], list[tuple[int, NVQueue, int | None]]]":
        """The GPFIFO entries of a laid-out resubmission (`Channel.submit_spans`' form): runs of
        the queue's own words and, between them, the called bodies, whose entries are made on
        first use and again only if a body was bound anew; and those calls, as (span index,
        body, its address when its entry was made: None, not yet)."""
        spans: list[tuple[int, int, int]] = []
        calls: list[tuple[int, NVQueue, int | None]] = []
        start = 0
        for pos, body in self._calls:
            if pos > start:
                spans.append((0, start, pos - start))
            calls.append((len(spans), body, None))
            spans.append((1, 0, 0))
            start = pos
        spans.append((0, start, len(self._d) - start))  # carries the progress release
        return spans, calls

    def native_resubmitter(self, var: Var, last: array, limit: int) -> "NativeReplay | None":
        """`HWQueue.native_resubmitter`: what `resubmitter`'s function does, with the device's
        next timeline value and the timeline's books, in one call of the launch helper
        (_nvlaunch.c `make_replay`), which writes the bytes the Python route writes. None where
        the helper is off or unavailable, or the queue is not laid out once. The helper holds
        the queue's words: the queue cannot grow afterwards (BufferError)."""
        from runtime.drivers.nv.gpfifo import _GP_PUT_DW
        from runtime.drivers.nv.launcher import _doorbell, native_helper
        from runtime.drivers.nv.methods import GP_LENGTH_SHIFT
        dev, ch = self.device, self.channel
        if not dev.launch_native or not self._laid_out(var) or len(self._patches) > 8 \
                or len(self._calls) > 16 or any(b.bound_va is None for _, b in self._calls) \
                or len(self._d) + len(ch._trailer) > ch.pb_dw // 2:
            return None
        mod = native_helper()
        if mod is None:
            return None
        spans, calls = self._spans()
        flat = array("Q")
        for ext, a, cnt in spans:
            flat.extend((ext, a, cnt))
        for i, body, _ in calls:
            assert body.bound_va is not None
            flat[3 * i + 1] = gp_entry(body.bound_va, len(body))
        bell, index, width, token = _doorbell(ch)
        if isinstance(bell, memoryview):
            bell = bell[:]  # the helper's own view (see ShapeLauncher._native)
        fn = mod.make_replay(
            words=self._d, spans=flat, calls=tuple((b, b.bound_va) for _, b in self._calls),
            patches=tuple((p.lo, p.hi, p.add, p.max_bits) for p in self._patches),
            vals=self._vals, var=var, pushbuf=ch.pb[:], pb_entry_base=ch._pb_entry_base,
            length_shift=GP_LENGTH_SHIFT, trailer=tuple(ch._trailer),
            trailer_seq_dw=SEM_PAYLOAD_LO_DW, device_words=dev.words, channel_words=ch.state,
            records=ch.records, ring=ch.ring[:], userd=ch.userd[:], doorbell=bell,
            progress=ch.progress.value_view[:], last=last, limit=limit,
            timeline=dev.timeline_signal.value_view[:],
            head_dw=0 if self._head_wait is None else HEAD_WAIT_DW,
            head_add=self._head_wait or 0, entries=ch.entries,
            gp_put_dw=_GP_PUT_DW, token=token, doorbell_index=index, doorbell_width=width,
            on_error=dev.note_submit_error)
        return fn  # type: ignore[no-any-return]


class NVComputeQueue(NVQueue):
    """Commands for the compute channel."""

    engine = "compute"

    def __init__(self, device: "NVDevice", channel: "Channel | None" = None) -> None:
        super().__init__(device, channel or device.compute_channel)
        self._last_launch: tuple[NVProgram, NVKernArgs] | None = None
        self._launches_since_sync = 0
        # launch block address -> dependent QMD slots used, for the launches this queue recorded
        self._dependents: dict[int, int] = {}
        # launch blocks whose QMD lets its one successor start early: nothing else may link to
        # them, since their pre-exit would start it too soon (`exec_after`)
        self._early: set[int] = set()
        # the next latch id of an early-start edge: one per edge, counted from 1 per queue (so
        # per graph body). Ids repeat from one replay, queue or graph to the next; a waiting grid
        # is only ever started by the link of the grid that arrives at its latch, and the H200
        # ran chains replayed so correctly.
        self._next_latch = 1

    def _after_host_method(self, drained: bool, launches: bool = False) -> None:
        self._last_launch = None
        if drained:
            self._launches_since_sync = 0
        elif launches:
            self._launches_since_sync += 1

    def signal(self, sig: "Signal", value: Value) -> "Self":
        """Sets `sig` to `value` once the queue's earlier work is done (module docstring: how)."""
        last = self._last_launch
        if last is not None and type(value) is int and value <= _M32:
            prg, args = last
            prg.write_release(args.qmd, self._sig_va(sig), value)
            self._last_launch = None
            return self
        self._host_release(sig, value)
        return self

    def timestamp(self, sig: "Signal") -> "Self":
        """Host release with WFI and timestamp into `sig` (its value word is set to 0)."""
        self._host_release(sig, 0)
        return self

    def memory_barrier(self) -> "Self":
        """INVALIDATE_SHADER_CACHES_NO_WFI: instruction, global-data and constant caches."""
        m = self.device.gen.compute
        self._d.extend(nvm(SUBC_COMPUTE, m.INVALIDATE_SHADER_CACHES_NO_WFI, m.cache_invalidate))
        return self

    def exec(self, prg: "NVProgram", args: "KernArgs | Value",  # type: ignore[override]
             global_size: Sequence[int], local_size: Sequence[int], *,
             ordered: bool = True) -> "Self":
        """Launches `prg` with the launch block `args` (from `prg.fill_kernargs`, which already
        wrote the QMD for this grid and block); `ordered` as in `HWQueue.exec`."""
        qmd_va = self._qmd_va(prg, args, global_size, local_size)
        # The last launch's completion implies the queue's earlier launches completed only when
        # it waited for them (then a signal may ride on its QMD release).
        serial = ordered or not self._launches_since_sync
        if ordered and self._launches_since_sync:
            self.launch_fence()
        self.send_pcas(qmd_va)
        self._last_launch = (prg, args) if isinstance(args, NVKernArgs) and serial else None
        self._launches_since_sync += 1
        if isinstance(args, KernArgs):
            self._dependents[args.va] = 0
        return self

    def _qmd_va(self, prg: "NVProgram", args: "KernArgs | Value", global_size: Sequence[int],
                local_size: Sequence[int]) -> int:
        """Checks a launch and returns its QMD's address."""
        if not isinstance(args, KernArgs):
            raise QueueError("NVIDIA launches need a KernArgs block: the QMD lives in it, and its "
                             "address (>> 8) cannot be patched as a variable")
        gsz = as_tuple3(global_size, "global_size")
        lsz = as_tuple3(local_size, "local_size")
        prg.check_launch(gsz, lsz)
        qmd_va = args.va + prg.qmd_offset(args.va)
        if qmd_va >= 1 << 40:
            raise QueueError(f"QMD at {qmd_va:#x}: SEND_PCAS_A takes a 40-bit address")
        return qmd_va

    def barrier(self) -> "Self":
        """The launch fence, then INVALIDATE_SHADER_CACHES_NO_WFI (`HWQueue.barrier`)."""
        self.launch_fence().memory_barrier()
        self._last_launch = None
        self._launches_since_sync = 0
        return self

    def exec_after(self, pred: KernArgs, prg: "NVProgram", args: KernArgs,  # type: ignore[override]
                   global_size: Sequence[int], local_size: Sequence[int],
                   early_start: bool = False) -> "Self":
        """Launches `prg` when the launch of block `pred` completes: `pred`'s QMD schedules this
        launch's QMD (module docstring). Writes into `pred`'s QMD (and, with `early_start`, this
        launch's). `early_start` (`HWQueue.exec_after`) is honoured where the QMD layout can say
        it (`QMD.link_early`) and this is `pred`'s first link; the caller promises `pred` gets
        no other."""
        if early_start:
            prg.check_early_start("exec_after(early_start=True)")
        qmd_va = self._qmd_va(prg, args, global_size, local_size)
        slots = self._dependents.get(pred.va) if isinstance(pred, NVKernArgs) else None
        qcls = self.device.qmd_class
        if slots is None or slots >= qcls.dependent_slots or not isinstance(args, NVKernArgs) \
                or pred.va in self._early:
            return super().exec_after(pred, prg, args, global_size, local_size)
        assert isinstance(pred, NVKernArgs)
        q = qcls(bytearray(pred.qmd))
        q.set_dependent(slots, qmd_va).order_for_successors()
        if early_start and slots == 0:
            succ = qcls(bytearray(args.qmd))
            if q.link_early(succ, self._next_latch):
                self._next_latch = self._next_latch % _M32 + 1
                self._early.add(pred.va)
                args.qmd[:] = succ.data
        pred.qmd[:] = q.data  # whole QMD at once: it may sit in write-combined memory
        self._dependents[pred.va] = slots + 1
        self._dependents[args.va] = 0
        self._last_launch = None
        self._launches_since_sync += 1
        return self

    def launch_fence(self) -> "Self":
        """THE LAUNCH FENCE: what orders a launch after the launch before it on the same channel,
        so that it sees every write of that grid. Every route emits it from here: `exec` between
        the launches of a queue (and so graph bodies), and the hot path's prebuilt command
        segments (`timeline_launch(fenced=True)`), whose chained GPFIFO entries start at it.
        The compute class's WAIT_FOR_IDLE: the engine drains before the next grid starts. Of the
        mechanisms Hopper offers (scripts/probe_nv_deps.py, docs/decisions.md), it is the
        cheapest correct one for a launch that follows one already submitted; semaphore acquires
        cost more. Graphs, which record their launches together, link a launch to a single
        predecessor through the predecessor's QMD instead (`exec_after`) and take this fence
        (`barrier`) only where that cannot express an edge; nothing else emits a fence."""
        self._d.extend(nvm(SUBC_COMPUTE, self.device.gen.compute.WAIT_FOR_IDLE, 0))
        return self

    def send_pcas(self, qmd_va: int) -> "Self":
        """SEND_PCAS_A (the QMD's address >> 8; its data dword is the second word) and
        SEND_SIGNALING_PCAS2_B with the device's PCAS action: starts the grid the QMD describes."""
        m = self.device.gen.compute
        self._d.extend(nvm(SUBC_COMPUTE, m.SEND_PCAS_A, qmd_va >> 8))
        self._d.extend(nvm(SUBC_COMPUTE, m.SEND_SIGNALING_PCAS2_B,
                           m.pcas_action(self.device.pcas_action)))
        return self

    def setup(self, *, compute_class: int, shared_window: int, local_window: int) -> "Self":
        """Binds the compute class to its subchannel and sets the shared/local windows (once per
        channel; the shared window is 4 GiB aligned on Hopper)."""
        d, m = self._d, self.device.gen.compute
        d.extend(nvm(SUBC_COMPUTE, cl.NVC56F_SET_OBJECT, compute_class))
        d.extend(nvm(SUBC_COMPUTE, m.SET_SHADER_LOCAL_MEMORY_WINDOW_A,
                     hi32(local_window), lo32(local_window)))
        d.extend(nvm(SUBC_COMPUTE, m.SET_SHADER_SHARED_MEMORY_WINDOW_A,
                     hi32(shared_window), lo32(shared_window)))
        return self

    def set_local_memory(self, va: int, bytes_per_tpc: int, max_sm_count: int) -> "Self":
        """SET_SHADER_LOCAL_MEMORY_A/B (the SLM buffer) and _NON_THROTTLED_A/B/C (bytes per TPC)."""
        d, m = self._d, self.device.gen.compute
        d.extend(nvm(SUBC_COMPUTE, m.SET_SHADER_LOCAL_MEMORY_A, hi32(va), lo32(va)))
        d.extend(nvm(SUBC_COMPUTE, m.SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A,
                     hi32(bytes_per_tpc), lo32(bytes_per_tpc), max_sm_count))
        return self


@dataclass(frozen=True)
class LaunchCommands:
    """The commands of one timeline launch, built once with zero payloads, and the dword positions
    a launch patches (`timeline_launch`)."""

    words: array
    acquire: int            # the acquire's payload: the previous timeline value
    fence: int              # where the launch fence starts (a chained GPFIFO entry starts here)
    qmd: int                # SEND_PCAS_A's data: the QMD's address >> 8
    t1: int | None          # a timed launch's end release payload: the value waited for
    progress: int | None    # the progress release's payload: the submission's sequence number


def timeline_launch(device: "NVDevice", *, fenced: bool,
                    timed: "tuple[Signal, Signal] | None" = None,
                    progress: "Signal | None" = None) -> LaunchCommands:
    """THE command sequence of a launch on the device's timeline, for every route that launches
    from a template (the hot path's slot segments, the short path, the timed path):

        acquire timeline >= v-1 | [launch fence] | invalidate shader caches | [t0: release with
        timestamp] | SEND_PCAS (the QMD releases v when the grid completes) | [t1: release v
        after idle, with timestamp] | [progress: release seq with timestamp]

    `fenced` adds the launch fence (`NVComputeQueue.launch_fence`) after the acquire, so an entry
    may start there when the channel's own previous launch released v-1 (no acquire needed).
    `timed` = (t0, t1) signals the GPU time is read from; `progress` the channel's progress
    signal, for segments that carry their own progress release (the hot path's: the channel's
    trailer is left out of those). The queue path emits the same commands through the same
    NVComputeQueue methods (`Program.__call__`: wait, memory_barrier, exec, signal)."""
    q = NVComputeQueue(device)
    q.wait(device.timeline_signal, 0)
    acquire, fence = SEM_PAYLOAD_LO_DW, len(q)
    if fenced:
        q.launch_fence()
    q.memory_barrier()
    if timed is not None:
        # the acquire already ordered it after earlier work: no wait for idle
        q.host_semaphore(timed[0].va, 0, SEM_RELEASE_TS)
    qmd = len(q) + 1
    q.send_pcas(0)
    t1 = p = None
    if timed is not None:  # the CPU polls this value: no interrupt
        t1 = len(q) + SEM_PAYLOAD_LO_DW
        q.host_semaphore(timed[1].va, 0, SEM_RELEASE_WFI_TS)
    if progress is not None:  # with the front end's time, when SEND_PCAS has been issued
        p = len(q) + SEM_PAYLOAD_LO_DW
        q.host_semaphore(progress.va, 0, SEM_RELEASE_TS)
    return LaunchCommands(q.words, acquire, fence, qmd, t1, p)


class NVCopyQueue(NVQueue):
    """Commands for the copy channel."""

    engine = "copy"

    def __init__(self, device: "NVDevice") -> None:
        super().__init__(device, device.copy_channel)

    def copy(self, dst: int, src: int, size: int) -> "Self":
        """Copies `size` bytes from GPU address `src` to `dst`, in chunks of at most 2 GiB."""
        if size < 0:
            raise QueueError(f"copy of {size} bytes")
        d, m = self._d, self.device.gen.copy
        off = 0
        while off < size:
            n = min(size - off, MAX_COPY_CHUNK_B)
            s, t = src + off, dst + off
            d.extend(nvm(SUBC_COPY, m.OFFSET_IN_UPPER, hi32(s), lo32(s), hi32(t), lo32(t)))
            d.extend(nvm(SUBC_COPY, m.LINE_LENGTH_IN, n))
            d.extend(nvm(SUBC_COPY, m.LAUNCH_DMA, m.copy_word))
            off += n
        return self

    def fill(self, dst: int, pattern: int, size: int) -> "Self":
        """Fills as copies whose destination is remapped to REMAP_CONST_A (`HWQueue.fill`):
        4-byte components over the aligned middle, 1-byte components over an unaligned head or
        tail. The source address is the destination's (never read)."""
        pattern = check_fill(dst, pattern, size)
        d, m = self._d, self.device.gen.copy
        head = min(-dst % 4, size)
        body = (size - head) & ~3
        pieces = [(dst, head, 1)] if head else []
        off = dst + head
        while off < dst + head + body:
            n = min(MAX_COPY_CHUNK_B, dst + head + body - off)
            pieces.append((off, n, 4))
            off += n
        if size - head - body:
            pieces.append((off, size - head - body, 1))
        for addr, n, unit in pieces:
            comp = m.SET_REMAP_COMPONENTS_COMPONENT_SIZE_FOUR if unit == 4 else \
                m.SET_REMAP_COMPONENTS_COMPONENT_SIZE_ONE
            d.extend(nvm(SUBC_COPY, m.OFFSET_IN_UPPER, hi32(addr), lo32(addr), hi32(addr),
                         lo32(addr)))
            d.extend(nvm(SUBC_COPY, m.SET_REMAP_CONST_A, pattern))
            d.extend(nvm(SUBC_COPY, m.SET_REMAP_COMPONENTS, m.remap_const(comp)))
            d.extend(nvm(SUBC_COPY, m.LINE_LENGTH_IN, n // unit))
            d.extend(nvm(SUBC_COPY, m.LAUNCH_DMA, m.fill_word))
        return self

    def signal(self, sig: "Signal", value: Value) -> "Self":
        """Copy-engine semaphore release after the copies before it (32-bit payload, with
        timestamp); a value above 32 bits uses a host release instead."""
        val, var, add = self._resolve(value)
        if var is None and val > _M32:
            self._host_release(sig, val)
            return self
        va = self._sig_va(sig)
        n = len(self._d)
        m = self.device.gen.copy
        self._d.extend(nvm(SUBC_COPY, m.SET_SEMAPHORE_A, hi32(va), lo32(va), val & _M32))
        if var is not None:
            self._patch(var, add, n + 3, -1, 32)
        self._d.extend(nvm(SUBC_COPY, m.LAUNCH_DMA, m.release_word))
        return self

    def timestamp(self, sig: "Signal") -> "Self":
        """Copy-engine release of 0 with the timestamp into `sig`."""
        return self.signal(sig, 0)

    def memory_barrier(self) -> "Self":
        """Nothing to do: the copy engine does not cache, and each copy is flushed before the
        semaphore release that orders later work (FLUSH_ENABLE)."""
        return self

    def setup(self, *, copy_class: int) -> "Self":
        """Binds the copy class to its subchannel."""
        self._d.extend(nvm(SUBC_COPY, cl.NVC56F_SET_OBJECT, copy_class))
        return self
