"""Cubin loader: ELF sections, symbols, `.nv.info` attributes, the load image and its relocations.

A cubin is an ELF64 whose sections all sit at address 0: the loader chooses where each allocatable
section goes. Per kernel `k`: `.text.k` (SASS), `.nv.info.k` (attributes: parameters, limits),
`.nv.constant0.k` (the size of constant bank 0, filled per launch by the driver), `.nv.shared.k`
(static shared memory, NOBITS). Shared by all kernels: `.nv.info` (register counts and stack sizes
keyed by the kernel's symbol), `.nv.constantN` (N != 0: e.g. bank 4 holds addresses of `__device__`
globals, filled by relocations), `.nv.global.init` / `.nv.global` (device globals).

`.nv.info` records are {u8 format, u8 attribute, u16 size-or-value}; format 4 (SVAL) is followed by
`size` payload bytes, the others carry their value in the header (Mesa nv_cubin.c).
Barriers: `.text.k` sh_flags bits 20+ in the old ABI (ELF OSABI 0x33, CUDA <= 12), or the
NUM_BARRIERS attribute in the new one (OSABI >= 0x41, CUDA 13), where the SM version moves to
e_flags[15:8]. Parsing errors are `ProgramError`s that name the bad value and what was expected
(pyelftools' rule).
"""
from __future__ import annotations

import enum
import hashlib
import re
import struct
from dataclasses import dataclass, field

from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import round_up

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
SHT_NOBITS = 8
SHT_RELA = 4
SHT_REL = 9
SHT_SYMTAB = 2
SHF_ALLOC = 0x2
OSABI_CUDA_V1 = 0x33   # CUDA <= 12 cubins: SM version in e_flags[7:0]
OSABI_CUDA_V2 = 0x41   # CUDA 13 cubins: SM version in e_flags[15:8]
SECTION_ALIGN_B = 128  # instruction fetch granularity; tinygrad aligns every section so
RESERVED_SMEM_B = 0x400  # sm_90 reserves 1 KiB of shared memory per CTA


class EIAttr(enum.IntEnum):
    """`.nv.info` attribute codes (EIATTR_*, as cuobjdump names them)."""

    MAX_THREADS = 0x05
    PARAM_CBANK = 0x0A
    REQNTID = 0x10
    FRAME_SIZE = 0x11
    MIN_STACK_SIZE = 0x12
    KPARAM_INFO = 0x17
    CBANK_PARAM_SIZE = 0x19
    MAXREG_COUNT = 0x1B
    EXIT_INSTR_OFFSETS = 0x1C
    CRS_STACK_SIZE = 0x1E
    MAX_STACK_SIZE = 0x23
    REGCOUNT = 0x2F
    CUDA_API_VERSION = 0x37
    NUM_MBARRIERS = 0x38
    CTA_PER_CLUSTER = 0x3D
    EXPLICIT_CLUSTER = 0x3E
    MAX_CLUSTER_RANK = 0x3F
    NUM_BARRIERS = 0x4C


class EIFormat(enum.IntEnum):
    """`.nv.info` record formats."""

    NVAL = 1  # no value
    BVAL = 2  # byte value in the header
    HVAL = 3  # half-word value in the header
    SVAL = 4  # `size` payload bytes follow


class Reloc(enum.IntEnum):
    """CUDA relocation types this loader applies (tinygrad's set; 1 is the 32-bit absolute one)."""

    R_CUDA_32 = 1
    R_CUDA_64 = 2
    R_CUDA_ABS32_LO_32 = 0x38  # low half of an address into an instruction's immediate (bytes 4..7)
    R_CUDA_ABS32_HI_32 = 0x39  # high half likewise


@dataclass(frozen=True)
class Section:
    """One ELF section header plus its bytes (empty for NOBITS)."""

    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    data: bytes = field(repr=False)


@dataclass(frozen=True)
class Symbol:
    """An ELF symbol: `value` is an offset inside section `shndx`."""

    name: str
    value: int
    size: int
    info: int
    shndx: int


@dataclass(frozen=True)
class InfoRecord:
    """One `.nv.info` record: attribute, format and value (an int, or bytes for SVAL records)."""

    attr: int
    fmt: int
    value: int | bytes

    @property
    def name(self) -> str:
        try:
            return f"EIATTR_{EIAttr(self.attr).name}"
        except ValueError:
            return f"EIATTR_{self.attr:#04x}"


@dataclass(frozen=True)
class KernelParam:
    """One kernel parameter from EIATTR_KPARAM_INFO: ordinal, byte offset in the parameter block,
    size in bytes."""

    ordinal: int
    offset: int
    size: int


@dataclass
class KernelInfo:
    """What the launch needs to know about one kernel."""

    name: str
    text: Section
    registers: int = 0
    barriers: int = 0
    static_smem_B: int = 0
    param_base: int = 0       # offset of the parameters in constant bank 0 (EIATTR_PARAM_CBANK)
    param_size: int = 0
    cbank0_size: int = 0      # size of .nv.constant0.<k>: driver area + parameters
    params: list[KernelParam] = field(default_factory=list)
    max_threads: int = 0      # EIATTR_MAX_THREADS (0: none)
    reqntid: tuple[int, ...] = ()
    frame_B: int = 0
    min_stack_B: int = 0
    max_stack_B: int = 0
    crs_stack_B: int = 0
    constbanks: dict[int, Section] = field(default_factory=dict)  # per-kernel .nv.constantN.<k>
    records: list[InfoRecord] = field(default_factory=list)

    @property
    def local_B(self) -> int:
        """Local memory per thread the kernel needs (stack frame or declared minimum stack)."""
        return max(self.frame_B, self.min_stack_B, self.max_stack_B)


@dataclass
class Relocation:
    """A relocation into an allocatable section: patch `target`+`offset` with symbol + addend."""

    target: int   # section index
    offset: int
    type: int
    symbol: Symbol
    addend: int


@dataclass
class Cubin:
    """A parsed cubin; `layout` gives each loaded section's offset in the load image."""

    sm: int
    osabi: int
    sections: list[Section]
    symbols: list[Symbol]
    kernels: dict[str, KernelInfo]
    constbanks: dict[int, Section]      # module-wide .nv.constantN (N != 0)
    relocations: list[Relocation]
    layout: dict[int, int]              # section index -> offset in the image
    image_size: int

    def section(self, name: str) -> Section | None:
        """The section called `name`, if any."""
        return next((s for s in self.sections if s.name == name), None)

    def image(self, base: int) -> bytearray:
        """The load image for GPU address `base`: allocatable sections at their layout offsets
        (NOBITS zero-filled), relocations applied."""
        img = bytearray(self.image_size)
        for idx, off in self.layout.items():
            sec = self.sections[idx]
            if sec.type != SHT_NOBITS:
                img[off:off + sec.size] = sec.data
        for r in self.relocations:
            where = self.layout[r.target] + r.offset
            sym = r.symbol
            if sym.shndx not in self.layout:
                raise ProgramError(f"relocation at {self.sections[r.target].name}+{r.offset:#x} "
                                   f"refers to {sym.name!r}, which is not in a loaded section")
            value = base + self.layout[sym.shndx] + sym.value + r.addend
            if r.type == Reloc.R_CUDA_64:
                struct.pack_into("<Q", img, where, value)
            elif r.type == Reloc.R_CUDA_32:
                struct.pack_into("<I", img, where, value & 0xFFFFFFFF)
            elif r.type == Reloc.R_CUDA_ABS32_LO_32:
                struct.pack_into("<I", img, where + 4, value & 0xFFFFFFFF)
            elif r.type == Reloc.R_CUDA_ABS32_HI_32:
                struct.pack_into("<I", img, where + 4, value >> 32)
            else:  # parse() rejects the others; kept for safety
                raise ProgramError(f"unsupported CUDA relocation type {r.type:#x}")
        return img

    def offset_of(self, section: Section) -> int:
        """Offset of a loaded section in the image."""
        return self.layout[section.index]


def _cstr(blob: bytes, off: int) -> str:
    end = blob.find(b"\0", off)
    return blob[off:end if end >= 0 else len(blob)].decode(errors="replace")


def parse_info(data: bytes, where: str) -> list[InfoRecord]:
    """The records of one `.nv.info*` section."""
    out, off = [], 0
    while off + 4 <= len(data):
        fmt, attr, val = struct.unpack_from("<BBH", data, off)
        off += 4
        if fmt == EIFormat.SVAL:
            if off + val > len(data):
                raise ProgramError(f"{where}: attribute {attr:#x} claims {val} B at {off - 4:#x}, "
                                   f"the section has {len(data) - off}")
            out.append(InfoRecord(attr, fmt, data[off:off + val]))
            off += val
        elif fmt in (EIFormat.NVAL, EIFormat.BVAL, EIFormat.HVAL):
            out.append(InfoRecord(attr, fmt, val))
        else:
            raise ProgramError(f"{where}: record at {off - 4:#x} has format {fmt}, expected 1 to 4")
    return out


def parse(blob: bytes) -> Cubin:
    """Parses a cubin; raises `ProgramError` for anything that is not a loadable CUDA ELF."""
    if len(blob) < 64 or blob[:4] != ELF_MAGIC:
        raise ProgramError("not an ELF file (a cubin starts with \\x7fELF)")
    if blob[4] != 2 or blob[5] != 1:
        raise ProgramError(f"ELF class {blob[4]} / data {blob[5]}: a cubin is ELF64 little-endian "
                           "(2 / 1)")
    osabi = blob[7]
    (e_type, e_machine, _, _, _, e_shoff, e_flags, _, _, _, e_shentsize, e_shnum,
     e_shstrndx) = struct.unpack_from("<HHIQQQIHHHHHH", blob, 16)
    if e_machine != EM_CUDA:
        raise ProgramError(f"ELF machine {e_machine}, expected EM_CUDA ({EM_CUDA})")
    sm = (e_flags >> 8) & 0xFF if osabi >= OSABI_CUDA_V2 else e_flags & 0xFF
    if e_shentsize != 64 or e_shoff + e_shnum * 64 > len(blob):
        raise ProgramError(f"section headers at {e_shoff:#x} ({e_shnum} of {e_shentsize} B) run "
                           f"past the {len(blob)}-B file")
    raw = [struct.unpack_from("<IIQQQQIIQQ", blob, e_shoff + i * 64) for i in range(e_shnum)]
    if e_shstrndx >= len(raw):
        raise ProgramError(f"section-name table index {e_shstrndx} of {len(raw)} sections")
    strtab = raw[e_shstrndx]
    names = blob[strtab[4]:strtab[4] + strtab[5]]
    sections = []
    for i, (nm, typ, flags, _, off, size, link, info, align, _) in enumerate(raw):
        if typ != SHT_NOBITS and off + size > len(blob):
            raise ProgramError(f"section {i} runs past the end of the file")
        data = b"" if typ == SHT_NOBITS else bytes(blob[off:off + size])
        sections.append(Section(i, _cstr(names, nm), typ, flags, off, size, link, info, align,
                                data))
    symbols: list[Symbol] = []
    symtab = next((s for s in sections if s.type == SHT_SYMTAB), None)
    if symtab is not None:
        sstr = sections[symtab.link].data
        for k in range(symtab.size // 24):
            st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", symtab.data, k * 24)
            symbols.append(Symbol(_cstr(sstr, st_name), st_value, st_size, st_info, st_shndx))
    cub = Cubin(sm, osabi, sections, symbols, {}, {}, [], {}, 0)
    _layout(cub)
    _kernels(cub)
    _relocations(cub)
    return cub


def _loaded(sec: Section) -> bool:
    """Sections that go into the image: allocatable ones except per-launch and shared memory."""
    if not sec.flags & SHF_ALLOC or not sec.size:
        return False
    return not sec.name.startswith((".nv.shared.", ".nv.constant0", ".nv.local.",
                                   ".nv.reservedSmem"))


def _layout(cub: Cubin) -> None:
    off = 0
    for sec in cub.sections:
        if _loaded(sec):
            off = round_up(off, max(SECTION_ALIGN_B, sec.align or 1))
            cub.layout[sec.index] = off
            off += sec.size
    cub.image_size = max(off, 1)
    for sec in cub.sections:
        m = re.fullmatch(r"\.nv\.constant(\d+)", sec.name)
        if m and int(m.group(1)) != 0 and sec.index in cub.layout:
            cub.constbanks[int(m.group(1))] = sec


def _kernels(cub: Cubin) -> None:
    by_name = {s.name: s for s in cub.sections}
    sym_by_index = cub.symbols
    for sec in cub.sections:
        if not sec.name.startswith(".text."):
            continue
        name = sec.name[len(".text."):]
        k = KernelInfo(name, sec)
        if cub.osabi < OSABI_CUDA_V2:
            k.barriers = (sec.flags >> 20) & 0x1F
        shared = by_name.get(f".nv.shared.{name}")
        k.static_smem_B = shared.size if shared is not None else 0
        cb0 = by_name.get(f".nv.constant0.{name}")
        k.cbank0_size = cb0.size if cb0 is not None else 0
        for s in cub.sections:
            m = re.fullmatch(r"\.nv\.constant(\d+)\." + re.escape(name), s.name)
            if m and int(m.group(1)) != 0 and s.index in cub.layout:
                k.constbanks[int(m.group(1))] = s
        info = by_name.get(f".nv.info.{name}")
        if info is None:
            continue  # a device function's section, not a kernel entry point
        where = info.name
        for rec in parse_info(info.data, where):
            k.records.append(rec)
            v = rec.value
            if rec.attr == EIAttr.PARAM_CBANK and isinstance(v, bytes):
                _, k.param_base, k.param_size = struct.unpack_from("<IHH", v)
            elif rec.attr == EIAttr.CBANK_PARAM_SIZE and isinstance(v, int):
                k.param_size = max(k.param_size, v)
            elif rec.attr == EIAttr.KPARAM_INFO and isinstance(v, bytes):
                _, ordinal, offset, packed = struct.unpack_from("<IHHI", v)
                k.params.append(KernelParam(ordinal, offset, (packed >> 18) & 0x3FFF))
            elif rec.attr == EIAttr.MAX_THREADS and isinstance(v, bytes):
                k.max_threads = _product(struct.unpack_from(f"<{len(v) // 4}I", v))
            elif rec.attr == EIAttr.REQNTID and isinstance(v, bytes):
                k.reqntid = struct.unpack_from(f"<{len(v) // 4}I", v)
            elif rec.attr == EIAttr.NUM_BARRIERS and isinstance(v, int):
                k.barriers = v
            elif rec.attr in (EIAttr.EXPLICIT_CLUSTER, EIAttr.CTA_PER_CLUSTER):
                raise ProgramError(f"{name}: thread-block clusters ({rec.name}) are not supported "
                                   "(they need a GRID_GPC_CGA QMD and cluster constants)")
        k.params.sort(key=lambda p: p.ordinal)
        cub.kernels[name] = k
    # Module-wide .nv.info: per-kernel register counts and stack sizes, keyed by symbol index.
    gen = by_name.get(".nv.info")
    if gen is not None:
        for rec in parse_info(gen.data, ".nv.info"):
            if not isinstance(rec.value, bytes) or len(rec.value) < 8:
                continue
            sym_idx, val = struct.unpack_from("<II", rec.value)
            if sym_idx >= len(sym_by_index):
                raise ProgramError(f".nv.info: {rec.name} names symbol {sym_idx} of "
                                   f"{len(sym_by_index)}")
            k2 = cub.kernels.get(sym_by_index[sym_idx].name)
            if k2 is None:
                continue
            if rec.attr == EIAttr.REGCOUNT:
                k2.registers = val
            elif rec.attr == EIAttr.FRAME_SIZE:
                k2.frame_B = val
            elif rec.attr == EIAttr.MIN_STACK_SIZE:
                k2.min_stack_B = val
            elif rec.attr == EIAttr.MAX_STACK_SIZE:
                k2.max_stack_B = val
            elif rec.attr == EIAttr.CRS_STACK_SIZE:
                k2.crs_stack_B = val
    for k in cub.kernels.values():
        if not k.registers:  # fallback: the register count in `.text.<k>` sh_info >> 24
            k.registers = k.text.info >> 24


def _relocations(cub: Cubin) -> None:
    for sec in cub.sections:
        if sec.type == SHT_REL:
            raise ProgramError(f"{sec.name}: REL relocations (without addends) are not supported")
        if sec.type != SHT_RELA or sec.info not in cub.layout:
            continue  # relocations of sections that are not loaded (.debug_frame) do not matter
        for k in range(sec.size // 24):
            r_offset, r_info, r_addend = struct.unpack_from("<QQq", sec.data, k * 24)
            rtype, sym_idx = r_info & 0xFFFFFFFF, r_info >> 32
            if rtype not in Reloc.__members__.values():
                known = ", ".join(r.name for r in Reloc)
                raise ProgramError(f"{sec.name}: relocation type {rtype:#x} at {r_offset:#x} is "
                                   f"not supported (known: {known})")
            if sym_idx >= len(cub.symbols):
                raise ProgramError(f"{sec.name}: relocation names symbol {sym_idx} of "
                                   f"{len(cub.symbols)}")
            cub.relocations.append(Relocation(sec.info, r_offset, rtype, cub.symbols[sym_idx],
                                              r_addend))


def _product(xs: tuple[int, ...]) -> int:
    out = 1
    for x in xs:
        out *= max(x, 1)
    return out


# ----------------------------------------------------------------------------- parameter names
# cubin sha256 -> {kernel: parameter names}, for kernels compiled in this process (a droppable
# cache: without it, parameters are called arg0, arg1, ...).
_PARAM_NAMES: dict[bytes, dict[str, list[str]]] = {}
_KERNEL_DECL = re.compile(r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?'
                          r"void\s+([A-Za-z_]\w*)\s*\(([^)]*)\)")
_IDENT = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")


def param_names_from_source(src: str) -> dict[str, list[str]]:
    """The parameter names of each `extern "C" __global__` kernel of CUDA C++ `src` (kernels
    whose declaration this simple reading does not understand are left out)."""
    out: dict[str, list[str]] = {}
    for m in _KERNEL_DECL.finditer(src):
        params = [p.split("=")[0].strip() for p in m.group(2).split(",")]
        if params == [""] or params == ["void"]:
            out[m.group(1)] = []
            continue
        names = [_IDENT.search(p) for p in params]
        if all(names):
            out[m.group(1)] = [n.group(1) for n in names if n is not None]
    return out


def remember_param_names(src: str, lib: bytes) -> None:
    """Records the parameter names of the kernels of `src` for the cubin `lib` compiled from it
    (`param_names_of` then finds them)."""
    names = param_names_from_source(src)
    if names:
        _PARAM_NAMES[hashlib.sha256(lib).digest()] = names


def param_names_of(lib: bytes, kernel: str) -> list[str] | None:
    """The parameter names recorded for `kernel` of cubin `lib`, or None."""
    if not _PARAM_NAMES:
        return None
    return _PARAM_NAMES.get(hashlib.sha256(lib).digest(), {}).get(kernel)
