"""Hardware command queues: builders of vendor command streams with patchable values.

A queue collects dwords in a preallocated `array('I')`. Each command method returns the queue, so a
submission reads as one chain: ``q.wait(sig, v).exec(prg, args, gsz, lsz).signal(sig, v +
1).submit()``.

Values that change between submissions (signal values, kernel-argument pointers) may be given as a
`Var` (or `Var + k`). The builder then records *patch points*: the dword positions the value's low
and high halves were written to. `submit(var_vals)` / `update(var_vals)` rewrite exactly those
dwords, so a queue is built once and resubmitted many times (tinygrad's `q_sints`/`_apply_var_vals`,
made explicit).

Contract for drivers (subclasses):
- implement the commands the engine supports; the base methods raise `QueueError` so a missing
  override fails loudly instead of silently returning None;
- write dwords with `self._d.extend(...)`, record symbolic values with `self._patch(...)`;
- implement `_submit()` (copy the dwords to the hardware ring, or reference bound memory, then ring
  the doorbell) and optionally `bind()` (place the commands in GPU memory for cheap resubmission).
"""
from __future__ import annotations

import operator
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, Sequence, Union

from runtime.hcq.errors import ProgramError, QueueError

if TYPE_CHECKING:
    from typing import Self

    from runtime.hcq.device import Device
    from runtime.hcq.memory import Buffer
    from runtime.hcq.program import KernArgs, Program
    from runtime.hcq.signal import Signal

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1


class Var:
    """A symbolic value bound at submission time. Identity is the object; `name` is for messages."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __add__(self, k: int) -> "VarExpr":
        return VarExpr(self, k)

    def __sub__(self, k: int) -> "VarExpr":
        return VarExpr(self, -k)

    def __repr__(self) -> str:
        return f"Var({self.name!r})"


@dataclass(frozen=True)
class VarExpr:
    """`var + add`: what a command stores when given ``v + 1``."""

    var: Var
    add: int = 0

    def __add__(self, k: int) -> "VarExpr":
        return VarExpr(self.var, self.add + k)

    def __sub__(self, k: int) -> "VarExpr":
        return VarExpr(self.var, self.add - k)


Value = Union[int, Var, VarExpr]


class NativeReplay(Protocol):
    """The function `HWQueue.native_resubmitter` returns: `replay(live, held=False)`."""

    def __call__(self, live: Sequence[Buffer], held: bool = ..., /) -> int: ...


@dataclass(frozen=True)
class PatchPoint:
    """Where a symbolic value landed: dword `lo` holds bits [31:0] of (var + add), dword `hi` (or
    -1) bits [63:32]; `max_bits` bounds the value (32 for commands that compare 32 bits)."""

    var: Var
    add: int
    lo: int
    hi: int
    max_bits: int = 64


class HWQueue:
    """Base builder. See the module docstring for the driver contract."""

    #: engine name for messages ("compute", "copy")
    engine = "queue"

    def __init__(self, device: "Device") -> None:
        self.device = device
        self._d = array("I")
        self._patches: list[PatchPoint] = []
        self._vals: dict[Var, int] = {}
        # When bound to GPU memory, patches are also written there (a u32 view of the bound copy).
        self._bound: memoryview | None = None

    # ------------------------------------------------------------------ commands (driver-provided)
    def signal(self, sig: "Signal", value: Value) -> "Self":
        """Sets `sig` to `value` once all earlier commands of this queue completed."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no signal command")

    def wait(self, sig: "Signal", value: Value) -> "Self":
        """Stalls the queue until `sig` >= `value`."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no wait command")

    def timestamp(self, sig: "Signal") -> "Self":
        """Writes the GPU clock into `sig`'s timestamp once earlier commands completed."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no timestamp command")

    def memory_barrier(self) -> "Self":
        """Makes earlier writes (by CPU, copies, other queues) visible to later commands."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no memory_barrier command")

    def exec(self, prg: "Program", args: "KernArgs | Value", global_size: Sequence[int],
             local_size: Sequence[int], *, ordered: bool = True) -> "Self":
        """Launches `prg` with `global_size` workgroups of `local_size` threads. `args` is the
        kernel argument block (from `Program.fill_kernargs`) or a symbolic address of one.

        With `ordered` (the default) the launch starts once every earlier launch of this queue
        has finished and its writes are visible, as in a CUDA stream. With `ordered=False` it may
        run concurrently with the earlier launches that no `barrier` separates from it (graphs
        launch independent nodes so); a later ordered launch, `barrier` or `signal` still waits
        for it."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) cannot launch kernels")

    def barrier(self) -> "Self":
        """Every launch recorded before the barrier finishes, and its writes become visible,
        before any launch recorded after it starts (AMD: CS_PARTIAL_FLUSH and a cache
        invalidation; NVIDIA: WAIT_FOR_IDLE and a cache invalidation)."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no barrier command")

    def exec_after(self, pred: "KernArgs", prg: "Program", args: "KernArgs",
                   global_size: Sequence[int], local_size: Sequence[int],
                   early_start: bool = False) -> "Self":
        """Launches `prg` once the launch of block `pred` (recorded earlier in this queue) has
        finished; other earlier launches may still be running. The default is `barrier` then an
        unordered launch (it waits for every earlier launch); a driver with a cheaper mechanism
        overrides it (NVIDIA: the predecessor's QMD schedules this one when its grid completes,
        so the driver may write into `pred`, which the caller owns, as a graph does).

        `early_start`: `prg` calls `griddepcontrol.wait` (cudaGridDependencySynchronize) before
        it reads anything `pred`'s launch wrote, and `pred` gets no other successor, so this
        launch may start while `pred`'s still runs (NVIDIA Hopper: programmatic dependent
        launch). A driver without the mechanism ignores it; the edge stays an ordinary one."""
        return self.barrier().exec(prg, args, global_size, local_size, ordered=False)

    def copy(self, dst: int, src: int, size: int) -> "Self":
        """Copies `size` bytes from GPU address `src` to `dst` (any alignment, any size)."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no copy command")

    def fill(self, dst: int, pattern: int, size: int) -> "Self":
        """Writes the 32-bit little-endian `pattern` over `size` bytes at GPU address `dst` (the
        byte at dst + i is byte i % 4 of the pattern). An unaligned `dst` or a size that is not a
        multiple of 4 needs a pattern of four equal bytes (a byte fill)."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) has no fill command")

    # ------------------------------------------------------------------ submission
    def submit(self, var_vals: Mapping[Var, int] | None = None) -> "Self":
        """Binds `var_vals` (patching in place) and hands the commands to the hardware."""
        if var_vals:
            self.update(var_vals)
        dev = self.device
        dev.check_usable()
        missing = {p.var for p in self._patches} - self._vals.keys()
        if missing:
            names = ", ".join(sorted(v.name for v in missing))
            raise QueueError(f"submit with unbound variable(s): {names}")
        try:
            with dev.submit_lock:  # one submission reaches a ring at a time
                self._submit()
        except Exception as e:  # a fault noticed while submitting poisons the device
            dev.note_submit_error(e)
            raise
        if dev.tracer is not None:
            dev.tracer.submitted(self)
        return self

    def resubmitter(self, var: Var) -> Callable[[int], None]:
        """A function that does what `submit({var: value})` does, for a queue submitted again and
        again with only `var` changing (a graph's replays): it checks the device, rewrites the
        variable's patch points and hands the commands to the hardware, with what can be worked
        out once worked out here. The caller holds the device's submission lock; a tracer is
        not told (the caller traces, or uses it only while none is attached). A driver may
        return a faster one; the base's calls `submit`."""
        def resubmit(value: int) -> None:
            self.submit({var: value})
        return resubmit

    def native_resubmitter(self, var: Var, last: array,
                           limit: int) -> "NativeReplay | None":
        """A timeline resubmission in one native call, or None where the driver has none: a
        function `replay(live, held=False)` that, with v = the device's timeline value + 1,
        does what `Device.resubmit_timeline(self.resubmitter(var))` does and notes v in
        `last[0]`, returning v; or returns 0, having submitted nothing, when a buffer in `live`
        was freed, the device may not submit (faulted, closed, or its submission lock held by
        another thread; `held`: the caller holds it), v > `limit`, or the rings lack room (the
        caller then takes the Python route, which raises the error or waits). The queue waits
        for `var` - 1 and signals `var` on the device's timeline."""
        return None

    def describe_commands(self) -> list[str]:
        """The queue's commands decoded, one line each (drivers decode their streams)."""
        return [f"{type(self).__name__}: {len(self._d)} dwords"]

    def call(self, body: "HWQueue") -> "Self":
        """Executes a bound queue's commands from this one (AMD: INDIRECT_BUFFER)."""
        raise QueueError(f"{type(self).__name__} ({self.engine}) cannot call other command buffers")

    def bind(self) -> "Self":
        """Places the commands in GPU memory so a resubmission sends only a reference to them (AMD:
        INDIRECT_BUFFER). Optional: the default keeps them in host memory and copies on submit. Do
        not patch a bound queue while the GPU may still be executing its previous submission."""
        return self

    def unbind(self) -> None:
        """Releases the GPU copy made by `bind` (the queue keeps its host copy)."""
        self._bound = None

    def value(self, var: Var) -> int:
        """The value `var` is bound to now (KeyError when it was never bound)."""
        return self._vals[var]

    def update(self, var_vals: Mapping[Var, int]) -> "Self":
        """Binds variables and rewrites their patch points (in the bound GPU copy as well). A value
        that does not fit a field it patches is refused and nothing is changed."""
        changed = {var: val for var, val in var_vals.items() if self._vals.get(var) != val}
        if not changed:
            return self
        writes = []
        for p in self._patches:
            val = changed.get(p.var)
            if val is None:
                continue
            v = val + p.add
            if v < 0 or v >> p.max_bits:
                raise QueueError(f"value {v:#x} of {p.var.name}{p.add:+d} does not fit the "
                                 f"{p.max_bits}-bit field it patches")
            writes.append((p.lo, v & _M32))
            if p.hi >= 0:
                writes.append((p.hi, (v >> 32) & _M32))
        self._vals.update(changed)
        d, bound = self._d, self._bound
        for pos, word in writes:
            d[pos] = word
            if bound is not None:
                bound[pos] = word
        return self

    def _submit(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _submit")

    # ------------------------------------------------------------------ helpers for drivers
    def _resolve(self, v: Value, max_bits: int = 64) -> tuple[int, Var | None, int]:
        """(current numeric value, variable or None, addend) for a command argument."""
        if type(v) is int:
            if v < 0 or v >> max_bits:
                raise QueueError(f"value {v:#x} does not fit a {max_bits}-bit field")
            return v, None, 0
        if isinstance(v, Var):
            var, add = v, 0
        elif isinstance(v, VarExpr):
            var, add = v.var, v.add
        else:
            raise QueueError(f"expected an int or a Var, got {type(v).__name__} {v!r}")
        cur = self._vals.get(var)
        return (0 if cur is None else (cur + add) & _M64), var, add

    def _sig_va(self, sig: "Signal") -> int:
        """The address of `sig` for this queue: the signal must be this device's (another
        device's signal is reached through `Device.map_signal`, which maps it here)."""
        if sig.device is not self.device:
            raise QueueError(f"{self.engine} queue of {self.device.name}: {sig!r} belongs to "
                             f"{sig.device.name}; wait on or write "
                             f"{self.device.name}.map_signal(sig) instead")
        return sig.buf.va

    def _patch(self, var: Var, add: int, lo: int, hi: int = -1, max_bits: int = 64) -> None:
        """Records a patch point for `var + add` at dword positions `lo` (and `hi`)."""
        self._patches.append(PatchPoint(var, add, lo, hi, max_bits))

    # ------------------------------------------------------------------ inspection
    def dwords(self) -> list[int]:
        """The command stream built so far."""
        return self._d.tolist()

    def __len__(self) -> int:
        return len(self._d)

    @property
    def patch_points(self) -> tuple[PatchPoint, ...]:
        """Recorded patch points (for tests and tools)."""
        return tuple(self._patches)

    def variables(self) -> set[Var]:
        """Variables this queue refers to."""
        return {p.var for p in self._patches}


def extend_from(queue: HWQueue, dwords: Iterable[int]) -> None:
    """Appends raw dwords (for tools and tests that splice prebuilt streams)."""
    queue._d.extend(dwords)


def check_fill(dst: int, pattern: int, size: int) -> int:
    """Validates a fill command's operands (see `HWQueue.fill`); returns the pattern."""
    if size <= 0:
        raise QueueError(f"fill size must be positive, got {size}")
    if not 0 <= pattern <= _M32:
        raise QueueError(f"fill pattern {pattern:#x} is not a 32-bit value")
    if (dst % 4 or size % 4) and pattern != (pattern & 0xFF) * 0x01010101:
        raise QueueError(f"fill of {size} B at {dst:#x} is not 4-byte aligned: only a byte "
                         f"pattern (four equal bytes) may fill it, got {pattern:#010x}")
    return pattern


def as_tuple3(xs: Sequence[int] | int, what: str) -> tuple[int, int, int]:
    """A launch dimension as (x, y, z); accepts an int or 1-3 positive integers (Python or numpy
    ints; a float such as 1.5 or 2.0 is refused rather than truncated). Raises `ProgramError`
    naming `what`."""
    if type(xs) is tuple and len(xs) == 3 and type(xs[0]) is int and type(xs[1]) is int \
            and type(xs[2]) is int and xs[0] > 0 and xs[1] > 0 and xs[2] > 0:
        return xs  # the common case, checked without building anything
    try:
        items = tuple(operator.index(x) for x in xs) if isinstance(xs, (tuple, list)) else \
            (operator.index(xs),)  # type: ignore[arg-type]  # an int, or refused below
    except TypeError:
        items = ()
    if not 1 <= len(items) <= 3 or any(x < 1 for x in items):
        raise ProgramError(f"{what} must be 1 to 3 positive integers, got {xs!r}")
    return items + (1,) * (3 - len(items))  # type: ignore[return-value]

