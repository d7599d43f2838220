"""NVIDIA GPU generations: one record per generation holds everything this driver needs to know
that differs between them, and is picked once when a device opens.

A record names the classes the driver allocates (compute, copy, GPFIFO channel, usermode), the
QMD version, the compute and copy method namespaces (the class headers' method offsets and fields,
resolved once from `hcq_bindings.nv.classes`), the constant bank 0 layout with the parameter base a
cubin gets when it does not say, and the launch limits. `pick_generation` chooses the record from
the class list RM reports (GET_CLASSLIST); the mock GPU offers what a record names
(`runtime.drivers.mock.nv_rm`). The class sets are those RM's class lists give each chip
(open-gpu-kernel-modules, src/nvidia/generated/g_gpu_class_list.c).

Adding a generation: one record in GENERATIONS, plus whatever hardware is genuinely new (a QMD
version in qmd.py, a method header family in the bindings).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from hcq_bindings.nv import classes as cl
from hcq_bindings.nv import rm_580 as rm

from runtime.drivers.nv.methods import fval
from runtime.drivers.nv.qmd import QMD, QMDV03, QMDV04, QMDV05
from runtime.hcq.errors import DeviceNotFound

_T = TypeVar("_T")


def _resolve(kind: type[_T], prefix: str, **extra: Any) -> _T:
    """A method namespace: every field of `kind` that `extra` does not give is the class header's
    `<prefix>_<field>` constant (all must exist, so a header family that lacks one fails at
    import, naming it)."""
    values: dict[str, Any] = {}
    missing = []
    for f in dataclasses.fields(kind):  # type: ignore[arg-type]
        if f.name in extra or f.name == "prefix":
            continue
        name = f"{prefix}_{f.name}"
        if not hasattr(cl, name):
            missing.append(name)
        else:
            values[f.name] = getattr(cl, name)
    if missing:
        raise ImportError(f"hcq_bindings.nv.classes lacks {', '.join(missing)}")
    return kind(prefix=prefix, **values, **extra)  # type: ignore[call-arg]


@dataclass(frozen=True)
class ComputeMethods:
    """The compute class's methods and fields this driver emits (offsets from one header family)."""

    prefix: str
    WAIT_FOR_IDLE: int
    INVALIDATE_SHADER_CACHES_NO_WFI: int
    INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION: tuple[int, int]
    INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA: tuple[int, int]
    INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT: tuple[int, int]
    SEND_PCAS_A: int
    SEND_SIGNALING_PCAS2_B: int
    SEND_SIGNALING_PCAS2_B_PCAS_ACTION: tuple[int, int]
    SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE: int
    SET_SHADER_LOCAL_MEMORY_WINDOW_A: int
    SET_SHADER_SHARED_MEMORY_WINDOW_A: int
    SET_SHADER_LOCAL_MEMORY_A: int
    SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A: int

    @property
    def cache_invalidate(self) -> int:
        """INVALIDATE_SHADER_CACHES_NO_WFI's data: instruction, global-data and constant caches
        (what tinygrad's barrier invalidates)."""
        return fval(self.INVALIDATE_SHADER_CACHES_NO_WFI_INSTRUCTION, 1) \
            | fval(self.INVALIDATE_SHADER_CACHES_NO_WFI_GLOBAL_DATA, 1) \
            | fval(self.INVALIDATE_SHADER_CACHES_NO_WFI_CONSTANT, 1)

    def pcas_action(self, action: int) -> int:
        """SEND_SIGNALING_PCAS2_B's data for PCAS action `action`."""
        return fval(self.SEND_SIGNALING_PCAS2_B_PCAS_ACTION, action)


@dataclass(frozen=True)
class CopyMethods:
    """The copy class's methods and LAUNCH_DMA fields this driver emits."""

    prefix: str
    OFFSET_IN_UPPER: int
    LINE_LENGTH_IN: int
    LAUNCH_DMA: int
    SET_SEMAPHORE_A: int
    LAUNCH_DMA_DATA_TRANSFER_TYPE: tuple[int, int]
    LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED: int
    LAUNCH_DMA_SRC_MEMORY_LAYOUT: tuple[int, int]
    LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH: int
    LAUNCH_DMA_DST_MEMORY_LAYOUT: tuple[int, int]
    LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH: int
    LAUNCH_DMA_FLUSH_ENABLE: tuple[int, int]
    LAUNCH_DMA_FLUSH_ENABLE_TRUE: int
    LAUNCH_DMA_SEMAPHORE_TYPE: tuple[int, int]
    LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE: int
    LAUNCH_DMA_REMAP_ENABLE: tuple[int, int]
    LAUNCH_DMA_REMAP_ENABLE_TRUE: int
    SET_REMAP_CONST_A: int
    SET_REMAP_COMPONENTS: int
    SET_REMAP_COMPONENTS_DST_X: tuple[int, int]
    SET_REMAP_COMPONENTS_DST_X_CONST_A: int
    SET_REMAP_COMPONENTS_COMPONENT_SIZE: tuple[int, int]
    SET_REMAP_COMPONENTS_COMPONENT_SIZE_ONE: int
    SET_REMAP_COMPONENTS_COMPONENT_SIZE_FOUR: int
    SET_REMAP_COMPONENTS_NUM_SRC_COMPONENTS: tuple[int, int]
    SET_REMAP_COMPONENTS_NUM_SRC_COMPONENTS_ONE: int
    SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS: tuple[int, int]
    SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS_ONE: int

    @property
    def copy_word(self) -> int:
        """LAUNCH_DMA of a copy: non-pipelined, pitch to pitch, virtual addresses."""
        return fval(self.LAUNCH_DMA_DATA_TRANSFER_TYPE,
                    self.LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED) \
            | fval(self.LAUNCH_DMA_SRC_MEMORY_LAYOUT, self.LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH) \
            | fval(self.LAUNCH_DMA_DST_MEMORY_LAYOUT, self.LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH)

    @property
    def fill_word(self) -> int:
        """LAUNCH_DMA of a fill: a copy whose destination components are remapped to a
        constant (the source is not read)."""
        return self.copy_word | fval(self.LAUNCH_DMA_REMAP_ENABLE,
                                     self.LAUNCH_DMA_REMAP_ENABLE_TRUE)

    def remap_const(self, component_size: int) -> int:
        """SET_REMAP_COMPONENTS for one destination component of `component_size` (the
        COMPONENT_SIZE value) taken from REMAP_CONST_A."""
        return fval(self.SET_REMAP_COMPONENTS_DST_X, self.SET_REMAP_COMPONENTS_DST_X_CONST_A) \
            | fval(self.SET_REMAP_COMPONENTS_COMPONENT_SIZE, component_size) \
            | fval(self.SET_REMAP_COMPONENTS_NUM_SRC_COMPONENTS,
                   self.SET_REMAP_COMPONENTS_NUM_SRC_COMPONENTS_ONE) \
            | fval(self.SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS,
                   self.SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS_ONE)

    @property
    def release_word(self) -> int:
        """LAUNCH_DMA of a semaphore release after the copies before it (flushed first)."""
        return fval(self.LAUNCH_DMA_FLUSH_ENABLE, self.LAUNCH_DMA_FLUSH_ENABLE_TRUE) \
            | fval(self.LAUNCH_DMA_SEMAPHORE_TYPE,
                   self.LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE)


@dataclass(frozen=True)
class Cb0Layout:
    """Constant bank 0's driver area (as libcuda-research, redplait/denvdis and tinygrad read
    it): byte offsets of what the driver writes before the parameters."""

    block_dim: int = 0x00          # 3 x u32
    grid_dim: int = 0x0C           # 3 x u32
    shared_window: int = 0x18      # u64
    local_window: int = 0x20       # u64
    stack_pointer: int = 0x28      # u32, tinygrad and CUDA write 0xfffdc0
    dynamic_smem: int = 0x2C       # u32
    param_start: int = 0x198       # u64: first byte of the parameters (for code taking their address)
    param_end: int = 0x1A0         # u64


@dataclass(frozen=True)
class Limits:
    """Launch limits (CUDA programming guide, compute capabilities 8.x-12.x)."""

    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (0x7FFFFFFF, 0xFFFF, 0xFFFF)
    max_block_threads: int = 1024
    registers_per_sm: int = 65536


@dataclass(frozen=True)
class NVGeneration:
    """Everything generation-specific this driver uses (module docstring)."""

    name: str
    chips: str                        # the chips whose class lists name these classes
    sm: tuple[int, ...]               # their SM versions (80, 86, ...)
    compute_class: int
    copy_class: int
    gpfifo_class: int
    usermode_class: int
    qmd: type[QMD]
    compute: ComputeMethods
    copy: CopyMethods
    param_base: int                   # cb0 offset of the parameters when the cubin does not say
    cb0: Cb0Layout = Cb0Layout()
    limits: Limits = Limits()
    shared_window_align: int = 1 << 32  # Hopper requires 4 GiB; harmless before
    class_names: tuple[tuple[int, str], ...] = ()   # (id, RM name) of its classes

    @property
    def classes(self) -> tuple[int, int, int, int]:
        """(usermode, GPFIFO, compute, copy): the classes a device of this generation allocates."""
        return self.usermode_class, self.gpfifo_class, self.compute_class, self.copy_class


_AMPERE_COMPUTE = _resolve(ComputeMethods, "NVC6C0")   # clc6c0.h (C7C0/C9C0 keep its offsets)
_HOPPER_COMPUTE = _resolve(ComputeMethods, "NVCBC0")   # clcbc0.h
_BLACKWELL_COMPUTE = _resolve(ComputeMethods, "NVCEC0")  # clcec0.h (CDC0 keeps its offsets)
_AMPERE_COPY = _resolve(CopyMethods, "NVC6B5")         # clc6b5.h (C7B5 keeps its offsets)
_HOPPER_COPY = _resolve(CopyMethods, "NVC8B5")         # clc8b5.h
_BLACKWELL_COPY = _resolve(CopyMethods, "NVC9B5")      # clc9b5.h (CAB5 keeps its offsets)

def _record(name: str, chips: str, sm: tuple[int, ...], *, usermode: str, gpfifo: str,
            compute: str, copy: str, qmd: type[QMD], compute_methods: ComputeMethods,
            copy_methods: CopyMethods, param_base: int) -> NVGeneration:
    """A record from the RM class names (as g_gpu_class_list.c spells them); their numbers come
    from the generated bindings, and the names stay with the record for messages."""
    ids = {n: getattr(rm, n) for n in (usermode, gpfifo, compute, copy)}
    return NVGeneration(name, chips, sm, ids[compute], ids[copy], ids[gpfifo], ids[usermode], qmd,
                        compute_methods, copy_methods, param_base,
                        class_names=tuple((v, n) for n, v in ids.items()))


#: newest first: a GPU gets the first record whose classes it offers
GENERATIONS: tuple[NVGeneration, ...] = (
    # GB20x also offers BLACKWELL_CHANNEL_GPFIFO_B and BLACKWELL_USERMODE_A; the GB10x channel and
    # usermode classes it offers too are the ones whose USERD and doorbell this driver knows.
    _record("blackwell-b", "GB20x", (120,), usermode="HOPPER_USERMODE_A",
            gpfifo="BLACKWELL_CHANNEL_GPFIFO_A", compute="BLACKWELL_COMPUTE_B",
            copy="BLACKWELL_DMA_COPY_B", qmd=QMDV05, compute_methods=_BLACKWELL_COMPUTE,
            copy_methods=_BLACKWELL_COPY, param_base=0x210),
    _record("blackwell", "GB10x", (100, 103), usermode="HOPPER_USERMODE_A",
            gpfifo="BLACKWELL_CHANNEL_GPFIFO_A", compute="BLACKWELL_COMPUTE_A",
            copy="BLACKWELL_DMA_COPY_A", qmd=QMDV05, compute_methods=_BLACKWELL_COMPUTE,
            copy_methods=_BLACKWELL_COPY, param_base=0x210),
    _record("hopper", "GH100", (90,), usermode="HOPPER_USERMODE_A",
            gpfifo="HOPPER_CHANNEL_GPFIFO_A", compute="HOPPER_COMPUTE_A",
            copy="HOPPER_DMA_COPY_A", qmd=QMDV04, compute_methods=_HOPPER_COMPUTE,
            copy_methods=_HOPPER_COPY, param_base=0x210),
    _record("ada", "AD10x", (89,), usermode="AMPERE_USERMODE_A",
            gpfifo="AMPERE_CHANNEL_GPFIFO_A", compute="ADA_COMPUTE_A", copy="AMPERE_DMA_COPY_B",
            qmd=QMDV03, compute_methods=_AMPERE_COMPUTE, copy_methods=_AMPERE_COPY,
            param_base=0x160),
    _record("ampere-b", "GA10x", (86, 87), usermode="AMPERE_USERMODE_A",
            gpfifo="AMPERE_CHANNEL_GPFIFO_A", compute="AMPERE_COMPUTE_B",
            copy="AMPERE_DMA_COPY_B", qmd=QMDV03, compute_methods=_AMPERE_COMPUTE,
            copy_methods=_AMPERE_COPY, param_base=0x160),
    _record("ampere", "GA100", (80,), usermode="AMPERE_USERMODE_A",
            gpfifo="AMPERE_CHANNEL_GPFIFO_A", compute="AMPERE_COMPUTE_A",
            copy="AMPERE_DMA_COPY_A", qmd=QMDV03, compute_methods=_AMPERE_COMPUTE,
            copy_methods=_AMPERE_COPY, param_base=0x160),
)


def class_names() -> dict[int, str]:
    """Class id -> RM name for every class a record names (for messages)."""
    return {v: n for g in GENERATIONS for v, n in g.class_names}


def generation_named(name: str) -> NVGeneration:
    """The record called `name` ("hopper")."""
    for g in GENERATIONS:
        if g.name == name:
            return g
    raise DeviceNotFound(f"no NVIDIA generation {name!r} (known: "
                         f"{', '.join(g.name for g in GENERATIONS)})")


def pick_generation(offered: set[int], what: str = "the GPU") -> NVGeneration:
    """The record whose compute class `offered` (RM's class list) contains, newest first; raises
    DeviceNotFound when none does, or when the GPU lacks one of the record's other classes."""
    for g in GENERATIONS:
        if g.compute_class in offered:
            lacking = [c for c in g.classes if c not in offered]
            if lacking:
                raise DeviceNotFound(f"{what} offers compute class {g.compute_class:#06x} "
                                     f"({g.name}) but not " + ", ".join(f"{c:#06x}" for c in
                                                                        lacking))
            return g
    compute = sorted(c for c in offered if c & 0xFF == 0xC0)
    raise DeviceNotFound(
        f"{what} is of a generation this runtime has no description of (compute classes "
        f"{', '.join(f'{c:#06x}' for c in compute) or 'none'}; described: "
        + ", ".join(f"{g.name} {g.compute_class:#06x}" for g in GENERATIONS)
        + "); add a record to runtime/drivers/nv/generation.py")


def method_prefix(class_id: int) -> str | None:
    """The method namespace ("NVCBC0") of a compute or copy class any record names."""
    for g in GENERATIONS:
        if class_id == g.compute_class:
            return g.compute.prefix
        if class_id == g.copy_class:
            return g.copy.prefix
    return None
