"""Queue meta data (QMD): the launch descriptor the compute engine reads at SEND_PCAS_A.

One class per QMD version, each driven by the generated `MW(hi:lo)` field tables of open-gpu-doc
(`hcq_bindings.nv.classes`): V03 (Ampere/Ada, clc6c0qmd.h, 256 B), V04 (Hopper, clcbc0qmd.h, 384 B) and
V05 (Blackwell, clcec0qmd.h, 384 B). No bit position is typed here; a field is named by its C name
and looked up in the version's table. What differs between versions (where the grid lives, whether
an address is shifted, which fields exist) is expressed by overriding the few semantic setters; a
generation's record (runtime/drivers/nv/generation.py) names its version.

The Hopper field set is the one verified on the H200 (tests/runtime/test_nv_hw.py launches with
it; test_nv_builders.py pins the byte positions).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, ClassVar

from hcq_bindings.nv import classes as cl

from runtime.hcq.errors import ProgramError

Field = tuple[int, int]
_M32 = 0xFFFFFFFF


@lru_cache(maxsize=None)
def _table(prefix: str) -> tuple[dict[str, Field], dict[str, Callable[[int], Field]],
                                 dict[str, int]]:
    """(plain fields, indexed fields, named values) of one generated QMD prefix."""
    pre = prefix + "_"
    plain: dict[str, Field] = {}
    indexed: dict[str, Callable[[int], Field]] = {}
    values: dict[str, int] = {}
    for n in dir(cl):
        if not n.startswith(pre):
            continue
        v = getattr(cl, n)
        key = n[len(pre):]
        if isinstance(v, tuple):
            plain[key] = v
        elif callable(v):
            indexed[key] = v
        elif isinstance(v, int):
            values[key] = v
    return plain, indexed, values


@dataclass(frozen=True)
class DwordField:
    """Where a field that lies within one dword sits: dword index, shift and mask (for the fast
    per-launch patching of grid, block and constant-buffer fields)."""

    index: int
    shift: int
    mask: int


class QMD:
    """A QMD of one version over a bytearray. Subclasses set the class attributes."""

    prefix: ClassVar[str]
    size_B: ClassVar[int]
    major: ClassVar[int]
    minor: ClassVar[int]
    grid_fields: ClassVar[tuple[str, str, str]]
    #: how many slots each family of indexed fields has (clc*qmd.h: 8 constant buffers, 3 release
    #: semaphores, 2 dependent QMDs; TPC_DISABLE_MASK is 8 dwords)
    index_counts: ClassVar[dict[str, int]] = {"CONSTANT_BUFFER": 8, "RELEASE": 3,
                                              "DEPENDENT_QMD": 2, "TPC_DISABLE_MASK": 8}

    def __init__(self, data: bytearray | memoryview | None = None) -> None:
        if data is None:
            data = bytearray(self.size_B)
        if len(data) < self.size_B:
            raise ValueError(f"a V{self.major:02d} QMD is {self.size_B} B, got {len(data)}")
        self.data = data

    # ------------------------------------------------------------------ fields by C name
    @classmethod
    def field(cls, name: str, index: int | None = None) -> Field:
        """(hi, lo) of field `name` (with `index` for indexed ones: CONSTANT_BUFFER_VALID(0))."""
        plain, indexed, _ = _table(cls.prefix)
        if index is None:
            f = plain.get(name)
        else:
            fn = indexed.get(name)
            f = fn(index) if fn is not None else None
        if f is None:
            what = name if index is None else f"{name}({index})"
            raise KeyError(f"{cls.prefix} has no field {what}")
        return f

    @classmethod
    def has_field(cls, name: str, index: int | None = None) -> bool:
        """True if the version's table defines the field."""
        try:
            cls.field(name, index)
            return True
        except KeyError:
            return False

    @classmethod
    def value(cls, name: str) -> int:
        """A named field value (`CWD_MEMBAR_TYPE_L1_SYSMEMBAR`)."""
        v = _table(cls.prefix)[2].get(name)
        if v is None:
            raise KeyError(f"{cls.prefix} has no value {name}")
        return v

    @classmethod
    def all_fields(cls) -> list[tuple[str, Field]]:
        """Every field of the version, indexed ones expanded (for decoders and checks)."""
        plain, indexed, _ = _table(cls.prefix)
        out = list(plain.items())
        for name, fn in indexed.items():
            count = next((n for pre, n in cls.index_counts.items() if name.startswith(pre)), 1)
            for i in range(count):
                f = fn(i)
                if f[0] < cls.size_B * 8:
                    out.append((f"{name}({i})", f))
        return out

    def set(self, name: str, value: int, index: int | None = None) -> "QMD":
        """Writes a field; raises `ProgramError` if the value does not fit."""
        hi, lo = self.field(name, index)
        width = hi - lo + 1
        if value < 0 or value >> width:
            what = name if index is None else f"{name}({index})"
            raise ProgramError(f"{self.prefix} {what}: {value:#x} does not fit {width} bits")
        first, last = lo // 8, hi // 8
        num = int.from_bytes(self.data[first:last + 1], "little")
        shift = lo - first * 8
        mask = ((1 << width) - 1) << shift
        num = (num & ~mask) | (value << shift)
        self.data[first:last + 1] = num.to_bytes(last - first + 1, "little")
        return self

    def get(self, name: str, index: int | None = None) -> int:
        """Reads a field."""
        hi, lo = self.field(name, index)
        first, last = lo // 8, hi // 8
        num = int.from_bytes(self.data[first:last + 1], "little")
        return (num >> (lo - first * 8)) & ((1 << (hi - lo + 1)) - 1)

    def write(self, **fields: int) -> "QMD":
        """Several plain fields at once, by C name."""
        for k, v in fields.items():
            self.set(k, v)
        return self

    @classmethod
    def dword_field(cls, name: str, index: int | None = None) -> DwordField:
        """Position of a field that does not cross a dword boundary."""
        hi, lo = cls.field(name, index)
        if lo // 32 != hi // 32:
            raise ValueError(f"{cls.prefix} {name} crosses a dword")
        return DwordField(lo // 32, lo % 32, (1 << (hi - lo + 1)) - 1)

    def decode(self) -> dict[str, int]:
        """Every non-zero field by name (for tests, the mock and error reports)."""
        out = {}
        for name, (hi, lo) in self.all_fields():
            first, last = lo // 8, hi // 8
            num = int.from_bytes(self.data[first:last + 1], "little")
            v = (num >> (lo - first * 8)) & ((1 << (hi - lo + 1)) - 1)
            if v:
                out[name] = v
        return out

    # ------------------------------------------------------------------ semantic setters
    def set_version(self) -> "QMD":
        """QMD_MAJOR/MINOR_VERSION (and QMD_TYPE where the version has one)."""
        return self.set("QMD_MAJOR_VERSION", self.major)

    def set_program(self, addr: int) -> "QMD":
        """The entry point's GPU address."""
        return self.write(PROGRAM_ADDRESS_LOWER=addr & _M32, PROGRAM_ADDRESS_UPPER=addr >> 32)

    def set_cbuf(self, index: int, addr: int, size: int) -> "QMD":
        """Constant buffer `index` at `addr` (64-B aligned on V04+), `size` bytes, marked valid."""
        raise NotImplementedError

    def prefetch_cbuf(self, index: int, size: int) -> "QMD":
        """Has the compute engine load constant buffer `index` (`size` bytes) before the CTAs
        launch, where the layout can say so and that was measured to help; else nothing."""
        return self

    def set_shared_memory(self, size_B: int) -> "QMD":
        """Shared memory per CTA in bytes (static + dynamic + the reserved 1 KiB)."""
        return self.set("SHARED_MEMORY_SIZE", size_B)

    def set_registers(self, count: int) -> "QMD":
        """Registers per thread."""
        return self.set("REGISTER_COUNT", count)

    def set_local_memory(self, per_thread_B: int) -> "QMD":
        """Shader local memory per thread (the SLM the device allocated: HIGH size, LOW 0)."""
        return self.set("SHADER_LOCAL_MEMORY_HIGH_SIZE", per_thread_B)

    def set_grid(self, gx: int, gy: int, gz: int) -> "QMD":
        """The grid in CTAs."""
        for name, v in zip(self.grid_fields, (gx, gy, gz)):
            self.set(name, v)
        return self

    def set_block(self, lx: int, ly: int, lz: int) -> "QMD":
        """The CTA in threads."""
        for i, v in enumerate((lx, ly, lz)):
            self.set(f"CTA_THREAD_DIMENSION{i}", v)
        return self

    def set_release(self, index: int, addr: int, payload: int) -> "QMD":
        """Semaphore release `index` when the grid completes: 32-bit payload, four-word structure
        (payload at +0, timestamp at +8)."""
        raise NotImplementedError

    #: how many dependent QMDs one QMD can name (`set_dependent`)
    dependent_slots: ClassVar[int] = 0

    def set_dependent(self, slot: int, qmd_va: int) -> "QMD":
        """When this grid completes, the compute engine schedules the QMD at `qmd_va` (256-byte
        aligned) itself: DEPENDENT_QMD `slot` enabled with action SCHEDULE and prefetch. A grid
        started this way begins after this one's completion (and its CWD membar), without the
        front end draining the engine as WAIT_FOR_IDLE does."""
        raise ProgramError(f"{self.prefix}: dependent QMDs are not supported")

    def order_for_successors(self) -> "QMD":
        """The completion barrier of a grid whose QMD starts its successors and that releases no
        semaphore itself, where the layout can say so and that was measured to help; else
        nothing (every grid keeps the system-scope barrier)."""
        return self

    def link_early(self, successor: "QMD", latch: int) -> bool:
        """Lets the successor this QMD links (`set_dependent`) start before this grid completes:
        this grid's link fires at its pre-exit and the grid arrives at latch `latch` when it
        completes; the successor waits on that latch at its first `griddepcontrol.wait`
        (cudaGridDependencySynchronize) and invalidates its data caches then. Writes both QMDs
        and returns True where the layout can say so and that was measured correct; else writes
        nothing and returns False (the link stays an ordinary one). The pre-exit fires every
        link of this QMD, so it must link that one successor only, and the successor's kernel
        must wait before it reads what this grid wrote."""
        return False

    def _check_dependent(self, slot: int, qmd_va: int) -> None:
        if not 0 <= slot < self.dependent_slots:
            raise ProgramError(f"{self.prefix} has {self.dependent_slots} dependent QMD slots, "
                               f"not slot {slot}")
        if qmd_va & 0xFF or qmd_va >> 40:
            raise ProgramError(f"dependent QMD at {qmd_va:#x}: the pointer holds a 256-byte "
                               "aligned 40-bit address")

    def set_sm_config(self, shared_B: int) -> "QMD":
        """MIN/TARGET/MAX_SM_CONFIG_SHARED_MEM_SIZE for a CTA needing `shared_B` bytes."""
        cfg = sm_config_value(self.carveouts_KiB(), shared_B)
        return self.write(MIN_SM_CONFIG_SHARED_MEM_SIZE=cfg, TARGET_SM_CONFIG_SHARED_MEM_SIZE=cfg,
                          MAX_SM_CONFIG_SHARED_MEM_SIZE=self.max_sm_config())

    @classmethod
    def carveouts_KiB(cls) -> tuple[int, ...]:
        """The L1/shared carveouts the SM supports, in KiB."""
        raise NotImplementedError

    @classmethod
    def max_sm_config(cls) -> int:
        """MAX_SM_CONFIG_SHARED_MEM_SIZE: the largest carveout, encoded."""
        return cls.carveouts_KiB()[-1] // 4 + 1

    @classmethod
    def max_shared_B(cls) -> int:
        """The most shared memory a CTA may have."""
        return cls.carveouts_KiB()[-1] * 1024

    def set_common(self, *, sass_version: int) -> "QMD":
        """The fields every launch of this runtime sets the same way."""
        self.set_version()
        self.write(QMD_GROUP_ID=0x3F,
                   API_VISIBLE_CALL_LIMIT=self.value("API_VISIBLE_CALL_LIMIT_NO_CHECK"),
                   SAMPLER_INDEX=self.value("SAMPLER_INDEX_VIA_HEADER_INDEX"),
                   CWD_MEMBAR_TYPE=self.value("CWD_MEMBAR_TYPE_L1_SYSMEMBAR"),
                   INVALIDATE_TEXTURE_HEADER_CACHE=1, INVALIDATE_TEXTURE_SAMPLER_CACHE=1,
                   INVALIDATE_TEXTURE_DATA_CACHE=1, INVALIDATE_SHADER_DATA_CACHE=1,
                   SASS_VERSION=sass_version)
        return self.set("CONSTANT_BUFFER_INVALIDATE", 1, 0)

    def set_prefetch(self, addr: int, size_B: int) -> "QMD":
        """Instruction prefetch of the program (address >> 8, size in 256-B units, capped)."""
        units = min(size_B >> 8, (1 << (self.field("PROGRAM_PREFETCH_SIZE")[0]
                                        - self.field("PROGRAM_PREFETCH_SIZE")[1] + 1)) - 1)
        return self.write(PROGRAM_PREFETCH_ADDR_LOWER_SHIFTED=(addr >> 8) & _M32,
                          PROGRAM_PREFETCH_ADDR_UPPER_SHIFTED=addr >> 40,
                          PROGRAM_PREFETCH_SIZE=units)

    # ------------------------------------------------------------------ launch-time patching
    @classmethod
    def launch_fields(cls) -> tuple[DwordField, ...]:
        """Grid x/y/z, block x/y/z: the fields a launch rewrites, in that order."""
        names = (*cls.grid_fields, "CTA_THREAD_DIMENSION0", "CTA_THREAD_DIMENSION1",
                 "CTA_THREAD_DIMENSION2")
        return tuple(cls.dword_field(n) for n in names)

    @classmethod
    def cbuf_addr_fields(cls, index: int) -> tuple[DwordField, DwordField, int]:
        """(lower, upper, address shift) of constant buffer `index`'s address fields."""
        raise NotImplementedError

    @classmethod
    def release_fields(cls, index: int) -> tuple[DwordField, ...]:
        """Release semaphore `index`'s enable, address lower/upper and payload lower/upper."""
        raise NotImplementedError


def sm_config_value(carveouts_KiB: tuple[int, ...], shared_B: int) -> int:
    """The SM_CONFIG_SHARED_MEM_SIZE encoding (KiB / 4 + 1) of the smallest carveout that holds
    `shared_B` bytes (tinygrad computes the same from its carveout list)."""
    for kib in carveouts_KiB:
        if kib * 1024 >= shared_B:
            return kib // 4 + 1
    raise ProgramError(f"{shared_B} B of shared memory exceed the largest carveout "
                       f"({carveouts_KiB[-1]} KiB)")


class QMDV03(QMD):
    """Ampere/Ada (clc6c0qmd.h, NVC6C0_QMDV03_00): 256 B; grid is CTA_RASTER_*; unshifted
    addresses; SM_GLOBAL_CACHING_ENABLE exists; no QMD_TYPE."""

    prefix = "NVC6C0_QMDV03_00"
    size_B = 256
    major, minor = 3, 0
    grid_fields = ("CTA_RASTER_WIDTH", "CTA_RASTER_HEIGHT", "CTA_RASTER_DEPTH")

    def set_common(self, *, sass_version: int) -> "QMD":
        super().set_common(sass_version=sass_version)
        return self.set("SM_GLOBAL_CACHING_ENABLE", 1)

    def set_registers(self, count: int) -> "QMD":
        return self.set("REGISTER_COUNT_V", count)

    def set_cbuf(self, index: int, addr: int, size: int) -> "QMD":
        self.set("CONSTANT_BUFFER_ADDR_LOWER", addr & _M32, index)
        self.set("CONSTANT_BUFFER_ADDR_UPPER", addr >> 32, index)
        self.set("CONSTANT_BUFFER_SIZE_SHIFTED4", _size16(size), index)
        return self.set("CONSTANT_BUFFER_VALID", 1, index)

    def set_release(self, index: int, addr: int, payload: int) -> "QMD":
        p = f"RELEASE{index}_"
        return self.write(**{p + "ENABLE": 1, p + "ADDRESS_LOWER": addr & _M32,
                             p + "ADDRESS_UPPER": addr >> 32, p + "PAYLOAD_LOWER": payload & _M32,
                             p + "PAYLOAD_UPPER": payload >> 32})

    dependent_slots = 1  # V03 has one dependent pointer (DEPENDENT_QMD0_POINTER)

    def set_dependent(self, slot: int, qmd_va: int) -> "QMD":
        self._check_dependent(slot, qmd_va)
        return self.write(DEPENDENT_QMD0_ENABLE=1,
                          DEPENDENT_QMD0_ACTION=self.value("DEPENDENT_QMD0_ACTION_QMD_SCHEDULE"),
                          DEPENDENT_QMD0_PREFETCH=1, DEPENDENT_QMD0_POINTER=qmd_va >> 8)

    @classmethod
    def carveouts_KiB(cls) -> tuple[int, ...]:
        # tinygrad's list for Ampere/Ada (32, 64, 100 KiB; MAX = 0x1a).
        return (32, 64, 100)

    @classmethod
    def cbuf_addr_fields(cls, index: int) -> tuple[DwordField, DwordField, int]:
        return (cls.dword_field("CONSTANT_BUFFER_ADDR_LOWER", index),
                cls.dword_field("CONSTANT_BUFFER_ADDR_UPPER", index), 0)

    @classmethod
    def release_fields(cls, index: int) -> tuple[DwordField, ...]:
        p = f"RELEASE{index}_"
        return tuple(cls.dword_field(p + n) for n in ("ENABLE", "ADDRESS_LOWER", "ADDRESS_UPPER",
                                                     "PAYLOAD_LOWER", "PAYLOAD_UPPER"))


class QMDV04(QMD):
    """Hopper (clcbc0qmd.h, NVCBC0_QMDV04_00): 384 B; QMD_TYPE GRID_CTA; GRID_*; constant buffer
    addresses >> 6 and sizes >> 4; program address unshifted."""

    prefix = "NVCBC0_QMDV04_00"
    size_B = 384
    major, minor = 4, 0
    grid_fields = ("GRID_WIDTH", "GRID_HEIGHT", "GRID_DEPTH")

    def set_version(self) -> "QMD":
        return self.write(QMD_MAJOR_VERSION=self.major, QMD_MINOR_VERSION=self.minor,
                          QMD_TYPE=self.value("QMD_TYPE_GRID_CTA"))

    def set_cbuf(self, index: int, addr: int, size: int) -> "QMD":
        if addr & 0x3F:
            raise ProgramError(f"constant buffer {index} at {addr:#x} is not 64-byte aligned")
        self.set("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", (addr >> 6) & _M32, index)
        self.set("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", addr >> 38, index)
        self.set("CONSTANT_BUFFER_SIZE_SHIFTED4", _size16(size), index)
        return self.set("CONSTANT_BUFFER_VALID", 1, index)

    def prefetch_cbuf(self, index: int, size: int) -> "QMD":
        # On the H200 a grid that its predecessor's QMD starts reaches its first instruction about
        # 0.2 us sooner when its kernel arguments are loaded before its CTAs launch; its constant
        # bank is written by the CPU before the submission, so the early load reads what a late
        # one would. (PRE_MAX_SIZE counts 256-byte units, at most 63.)
        self.set("CONSTANT_BUFFER_PREFETCH", self.value("CONSTANT_BUFFER_PREFETCH_PREFETCH_PRE"),
                 index)
        return self.set("CONSTANT_BUFFER_PREFETCH_PRE_MAX_SIZE_SHIFTED8", min(-(-size // 256), 63))

    def set_release(self, index: int, addr: int, payload: int) -> "QMD":
        p = f"RELEASE_SEMAPHORE{index}_"
        self.set("RELEASE_ENABLE", 1, index)
        return self.write(**{p + "ADDR_LOWER": addr & _M32, p + "ADDR_UPPER": addr >> 32,
                             p + "PAYLOAD_LOWER": payload & _M32,
                             p + "PAYLOAD_UPPER": payload >> 32})

    dependent_slots = 2

    def order_for_successors(self) -> "QMD":
        # What CUDA's graphs do on Hopper, and measured on the H200 to start each successor
        # sooner (docs/benchmarks.md): a GPU-scope barrier (the successors are grids on this
        # GPU) with task chasing. A grid that releases a semaphore keeps the system-scope barrier, since the
        # host may read what it wrote as soon as it sees the release; so does the last grid of
        # a chain, whose completion the host waits for.
        if self.get("RELEASE_ENABLE", 0):
            return self
        return self.write(CWD_MEMBAR_TYPE=self.value("CWD_MEMBAR_TYPE_L1_MEMBAR"),
                          CWD_MEMBAR_TASK_CHASING_ENABLE=1)

    def link_early(self, successor: "QMD", latch: int) -> bool:
        # CUDA's programmatic dependent launch as its graphs encode it on Hopper, run correct on
        # the H200 over long chains in VRAM and host memory: the producer pre-exits and arrives,
        # the consumer waits on the same latch and invalidates the caches that could hold data
        # older than the producer's writes.
        if not 0 < latch <= _M32:
            raise ProgramError(f"latch id {latch} is outside 1..{_M32:#x}")
        self.write(ENABLE_PROGRAM_PRE_EXIT=1, ARRIVE_AT_LATCH_VALID=1, ARRIVE_AT_LATCH_ID=latch)
        successor.write(WAIT_ON_LATCH_VALID=1, WAIT_ON_LATCH_ID=latch,
                        LATCH_ACQUIRE_INVALIDATE_SHADER_DATA_CACHE=1,
                        LATCH_ACQUIRE_INVALIDATE_TEXTURE_DATA_CACHE=1)
        return True

    def set_dependent(self, slot: int, qmd_va: int) -> "QMD":
        self._check_dependent(slot, qmd_va)
        self.set("DEPENDENT_QMD_ENABLE", 1, slot)
        self.set("DEPENDENT_QMD_ACTION", self.value("DEPENDENT_QMD_ACTION_QMD_SCHEDULE"), slot)
        self.set("DEPENDENT_QMD_PREFETCH", 1, slot)
        return self.set(f"DEPENDENT_QMD{slot}_POINTER", qmd_va >> 8)

    @classmethod
    def carveouts_KiB(cls) -> tuple[int, ...]:
        # sm_90 carveouts up to 228 KiB (CUDA programming guide, compute capability 9.0).
        return (8, 16, 32, 64, 100, 132, 164, 196, 228)

    @classmethod
    def cbuf_addr_fields(cls, index: int) -> tuple[DwordField, DwordField, int]:
        return (cls.dword_field("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", index),
                cls.dword_field("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", index), 6)

    @classmethod
    def release_fields(cls, index: int) -> tuple[DwordField, ...]:
        p = f"RELEASE_SEMAPHORE{index}_"
        return (cls.dword_field("RELEASE_ENABLE", index),
                *(cls.dword_field(p + n) for n in ("ADDR_LOWER", "ADDR_UPPER", "PAYLOAD_LOWER",
                                                   "PAYLOAD_UPPER")))


class QMDV05(QMDV04):
    """Blackwell (clcec0qmd.h, NVCEC0_QMDV05_00): 384 B; program address >> 4; shared size >> 7;
    local memory sizes >> 4."""

    prefix = "NVCEC0_QMDV05_00"
    major, minor = 5, 0

    def prefetch_cbuf(self, index: int, size: int) -> "QMD":
        return self  # its prefetch size field is laid out otherwise, and no Blackwell measured it

    def order_for_successors(self) -> "QMD":
        return self  # no Blackwell measured it

    def link_early(self, successor: "QMD", latch: int) -> bool:
        return False  # no Blackwell measured it

    def set_program(self, addr: int) -> "QMD":
        if addr & 0xF:
            raise ProgramError(f"program at {addr:#x} is not 16-byte aligned")
        return self.write(PROGRAM_ADDRESS_LOWER_SHIFTED4=(addr >> 4) & _M32,
                          PROGRAM_ADDRESS_UPPER_SHIFTED4=addr >> 36)

    def set_shared_memory(self, size_B: int) -> "QMD":
        return self.set("SHARED_MEMORY_SIZE_SHIFTED7", -(-size_B // 128))

    def set_local_memory(self, per_thread_B: int) -> "QMD":
        return self.set("SHADER_LOCAL_MEMORY_HIGH_SIZE_SHIFTED4", -(-per_thread_B // 16))


def _size16(size: int) -> int:
    """A constant-buffer size in the SIZE_SHIFTED4 encoding (16-byte units, rounded up)."""
    return -(-size // 16)


def describe_qmd(qcls: type[QMD], data: Any) -> str:
    """The non-zero fields of a QMD, one "NAME=value" per field (for reports)."""
    fields = qcls(bytearray(bytes(data[:qcls.size_B]))).decode()
    return " ".join(f"{k}={v:#x}" for k, v in sorted(fields.items()))
