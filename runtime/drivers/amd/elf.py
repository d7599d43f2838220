"""AMDHSA code objects: ELF sections, symbols, kernel descriptors and the metadata note.

A code object from clang (`-target amdgcn-amd-amdhsa`) is an ET_DYN ELF64 whose `.text` holds the
kernels' machine code, whose `.rodata` holds one 64-byte kernel descriptor per kernel (symbol
`NAME.kd`, layout in llvm/Support/AMDHSAKernelDescriptor.h) and whose NT_AMDGPU_METADATA note
(type 32, owner "AMDGPU") is a msgpack map describing every kernel's arguments (AMDGPUUsage.rst,
"Code Object V4/V5 Metadata"). The msgpack decoder here covers the whole format so no dependency
is needed.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
NT_AMDGPU_METADATA = 32
SHT_SYMTAB, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 2, 7, 8, 11
PT_LOAD = 1
STT_FUNC = 2
MAX_IMAGE_B = 1 << 30   # a loaded image larger than this is a corrupt header, not code

# kernel_code_properties bits (AMDHSAKernelDescriptor.h)
KCP_PRIVATE_SEGMENT_BUFFER, KCP_DISPATCH_PTR, KCP_QUEUE_PTR, KCP_KERNARG_SEGMENT_PTR = 0, 1, 2, 3
KCP_DISPATCH_ID, KCP_FLAT_SCRATCH_INIT, KCP_PRIVATE_SEGMENT_SIZE, KCP_WAVEFRONT_SIZE32 = 4, 5, 6, 10


class ElfError(ValueError):
    """The bytes are not a well-formed AMDHSA code object; the message says what is wrong."""


# -- msgpack ---------------------------------------------------------------------------------
def msgpack_unpack(data: bytes) -> Any:
    """Decodes one msgpack object (the spec at github.com/msgpack/msgpack/blob/master/spec.md)."""
    obj, pos = _mp(data, 0)
    if pos != len(data):
        raise ElfError(f"msgpack: {len(data) - pos} trailing bytes after the object")
    return obj


def _mp(b: bytes, p: int) -> tuple[Any, int]:
    if p >= len(b):
        raise ElfError("msgpack: truncated")
    t = b[p]
    p += 1
    if t <= 0x7F:
        return t, p
    if t >= 0xE0:
        return t - 0x100, p
    if 0x80 <= t <= 0x8F:
        return _mp_map(b, p, t & 0xF)
    if 0x90 <= t <= 0x9F:
        return _mp_arr(b, p, t & 0xF)
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        return b[p:p + n].decode(), p + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if t in fixed:
        return fixed[t], p
    sizes = {0xCC: "B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: "b", 0xD1: ">h", 0xD2: ">i",
             0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if t in sizes:
        (v,) = struct.unpack_from(sizes[t], b, p)
        return v, p + struct.calcsize(sizes[t])
    lens = {0xD9: ("B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"), 0xC4: ("B", "bin"),
            0xC5: (">H", "bin"), 0xC6: (">I", "bin"), 0xDC: (">H", "arr"), 0xDD: (">I", "arr"),
            0xDE: (">H", "map"), 0xDF: (">I", "map")}
    if t in lens:
        fmt, kind = lens[t]
        (n,) = struct.unpack_from(fmt, b, p)
        p += struct.calcsize(fmt)
        if kind == "str":
            return b[p:p + n].decode(), p + n
        if kind == "bin":
            return bytes(b[p:p + n]), p + n
        return (_mp_arr if kind == "arr" else _mp_map)(b, p, n)
    raise ElfError(f"msgpack: unsupported type byte {t:#x} at {p - 1}")


def _mp_arr(b: bytes, p: int, n: int) -> tuple[list[Any], int]:
    out = []
    for _ in range(n):
        v, p = _mp(b, p)
        out.append(v)
    return out, p


def _mp_map(b: bytes, p: int, n: int) -> tuple[dict[Any, Any], int]:
    out = {}
    for _ in range(n):
        k, p = _mp(b, p)
        v, p = _mp(b, p)
        out[k] = v
    return out, p


# -- ELF -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Section:
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int


@dataclass(frozen=True)
class Symbol:
    name: str
    value: int
    size: int
    shndx: int
    is_function: bool = False   # STT_FUNC: kernels and the functions they call


@dataclass(frozen=True)
class KernelDescriptor:
    """The 64-byte `NAME.kd` object the hardware's dispatch setup is derived from."""

    group_segment_fixed_size: int
    private_segment_fixed_size: int
    kernarg_size: int
    kernel_code_entry_byte_offset: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    kernel_code_properties: int

    @classmethod
    def parse(cls, raw: bytes) -> "KernelDescriptor":
        if len(raw) < 64:
            raise ElfError(f"kernel descriptor is {len(raw)} B, expected 64")
        g, p, ka = struct.unpack_from("<III", raw, 0)
        (entry,) = struct.unpack_from("<q", raw, 16)
        rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", raw, 44)
        (kcp,) = struct.unpack_from("<H", raw, 56)
        return cls(g, p, ka, entry, rsrc1, rsrc2, rsrc3, kcp)

    def has(self, kcp_bit: int) -> bool:
        return bool(self.kernel_code_properties >> kcp_bit & 1)

    @property
    def user_sgpr_count(self) -> int:
        """RSRC2.USER_SGPR: how many COMPUTE_USER_DATA registers the wave starts with."""
        return self.rsrc2 >> 1 & 0x1F

    @property
    def vgpr_count(self) -> int:
        """VGPRs allocated per lane in wave32: RSRC1.VGPRS granules of 8 (gfx10+)."""
        return ((self.rsrc1 & 0x3F) + 1) * 8

    @property
    def wave32(self) -> bool:
        return self.has(KCP_WAVEFRONT_SIZE32)

    def user_sgpr_layout(self) -> dict[str, int]:
        """First user SGPR of each enabled input, in the order the hardware loads them."""
        out, n = {}, 0
        for bit, name, size in ((KCP_PRIVATE_SEGMENT_BUFFER, "private_segment_buffer", 4),
                                (KCP_DISPATCH_PTR, "dispatch_ptr", 2),
                                (KCP_QUEUE_PTR, "queue_ptr", 2),
                                (KCP_KERNARG_SEGMENT_PTR, "kernarg_segment_ptr", 2),
                                (KCP_DISPATCH_ID, "dispatch_id", 2),
                                (KCP_FLAT_SCRATCH_INIT, "flat_scratch_init", 2),
                                (KCP_PRIVATE_SEGMENT_SIZE, "private_segment_size", 1)):
            if self.has(bit):
                out[name] = n
                n += size
        return out


@dataclass(frozen=True)
class Kernel:
    """One kernel of a code object: descriptor, addresses (ELF virtual) and metadata."""

    name: str
    kd: KernelDescriptor
    kd_vaddr: int
    entry_vaddr: int
    metadata: dict[str, Any]

    @property
    def code_object_v5(self) -> bool:
        return any(a.get(".value_kind", "").startswith("hidden_block_count")
                   for a in self.metadata.get(".args", []))

    @property
    def kernarg_size(self) -> int:
        return int(self.metadata.get(".kernarg_segment_size", self.kd.kernarg_size))

    @property
    def group_segment_size(self) -> int:
        return int(self.metadata.get(".group_segment_fixed_size",
                                     self.kd.group_segment_fixed_size))


@dataclass
class CodeObject:
    """A parsed AMDHSA code object; `image()` gives the bytes laid out at their addresses."""

    data: bytes
    sections: list[Section]
    symbols: dict[str, Symbol]
    metadata: dict[str, Any]
    kernels: dict[str, Kernel] = field(default_factory=dict)
    # PT_LOAD segments: (file offset, vaddr, file size, memory size)
    loads: list[tuple[int, int, int, int]] = field(default_factory=list)
    abi_version: int = 0

    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise ElfError(f"no section {name!r} (have {[s.name for s in self.sections]})")

    def section_bytes(self, name: str) -> bytes:
        s = self.section(name)
        return self.data[s.offset:s.offset + s.size]

    def read_vaddr(self, vaddr: int, size: int) -> bytes:
        for off, va, filesz, _ in self.loads:
            if va <= vaddr and vaddr + size <= va + filesz:
                return self.data[off + vaddr - va:off + vaddr - va + size]
        raise ElfError(f"virtual address {vaddr:#x}+{size} is not in a PT_LOAD segment")

    @property
    def image_size(self) -> int:
        return max((va + memsz for _, va, _, memsz in self.loads), default=0)

    def image(self) -> bytes:
        """The loaded image: every PT_LOAD segment copied to its vaddr, the gaps zero."""
        out = bytearray(self.image_size)
        for off, va, filesz, _ in self.loads:
            out[va:va + filesz] = self.data[off:off + filesz]
        return bytes(out)


def parse(data: bytes) -> CodeObject:
    """Parses an AMDHSA code object; raises ElfError naming the first problem found."""
    try:
        return _parse(bytes(data))
    except ElfError:
        raise
    except (struct.error, ValueError, IndexError, KeyError, TypeError, UnicodeDecodeError) as e:
        # Offsets or sizes that point outside the file, strings without their terminator...
        raise ElfError(f"malformed ELF file ({type(e).__name__}: {e})") from None


def _parse(data: bytes) -> CodeObject:
    if len(data) < 64 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file (bad magic)")
    if data[4] != 2 or data[5] != 1:
        raise ElfError("not a little-endian ELF64 file")
    osabi, abiver = data[7], data[8]
    (e_machine,) = struct.unpack_from("<H", data, 18)
    if e_machine != EM_AMDGPU:
        raise ElfError(f"e_machine is {e_machine}, expected EM_AMDGPU ({EM_AMDGPU})")
    if osabi != ELFOSABI_AMDGPU_HSA:
        raise ElfError(f"EI_OSABI is {osabi}, expected ELFOSABI_AMDGPU_HSA ({ELFOSABI_AMDGPU_HSA})")
    e_phoff, e_shoff = struct.unpack_from("<QQ", data, 0x20)
    e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx = \
        struct.unpack_from("<HHHHH", data, 0x36)
    sections = _sections(data, e_shoff, e_shentsize, e_shnum, e_shstrndx)
    loads = []
    for i in range(e_phnum):
        p_type, _, p_off, p_va, _, p_filesz, p_memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", data, e_phoff + i * e_phentsize)
        if p_type == PT_LOAD:
            if p_off + p_filesz > len(data) or p_filesz > p_memsz or \
                    p_va + p_memsz > MAX_IMAGE_B:
                raise ElfError(f"PT_LOAD segment {i} (offset {p_off:#x}, {p_filesz:#x} B in "
                               f"the file, {p_memsz:#x} B at {p_va:#x}) does not fit the "
                               f"{len(data)}-B file or a {MAX_IMAGE_B >> 20}-MiB image")
            loads.append((p_off, p_va, p_filesz, p_memsz))
    symbols = _symbols(data, sections)
    metadata = _metadata(data, sections)
    co = CodeObject(data, sections, symbols, metadata, loads=loads, abi_version=abiver)
    for meta in metadata.get("amdhsa.kernels", []):
        kd_sym = symbols.get(meta.get(".symbol", meta[".name"] + ".kd"))
        if kd_sym is None:
            raise ElfError(f"kernel {meta['.name']!r} has no {meta['.name']}.kd symbol")
        kd = KernelDescriptor.parse(co.read_vaddr(kd_sym.value, 64))
        entry = kd_sym.value + kd.kernel_code_entry_byte_offset
        co.kernels[meta[".name"]] = Kernel(meta[".name"], kd, kd_sym.value, entry, meta)
    return co


def _cstr(data: bytes, off: int) -> str:
    end = data.index(b"\0", off)
    return data[off:end].decode()


def _sections(data: bytes, shoff: int, entsize: int, num: int, strndx: int) -> list[Section]:
    raw = []
    for i in range(num):
        name, typ, _, addr, off, size, link = \
            struct.unpack_from("<IIQQQQI", data, shoff + i * entsize)
        raw.append((name, typ, addr, off, size, link))
    if not 0 <= strndx < len(raw):
        raise ElfError(f"e_shstrndx {strndx} out of range")
    stroff = raw[strndx][3]
    return [Section(_cstr(data, stroff + n), t, a, o, s, lk) for n, t, a, o, s, lk in raw]


def _symbols(data: bytes, sections: list[Section]) -> dict[str, Symbol]:
    out: dict[str, Symbol] = {}
    for s in sections:
        if s.type not in (SHT_SYMTAB, SHT_DYNSYM):
            continue
        strs = sections[s.link]
        for i in range(s.size // 24):
            st_name, info, _, shndx, value, size = \
                struct.unpack_from("<IBBHQQ", data, s.offset + i * 24)
            name = _cstr(data, strs.offset + st_name)
            if name:
                out.setdefault(name, Symbol(name, value, size, shndx, info & 0xF == STT_FUNC))
    return out


def _metadata(data: bytes, sections: list[Section]) -> dict[str, Any]:
    for s in sections:
        if s.type != SHT_NOTE:
            continue
        p, end = s.offset, s.offset + s.size
        while p + 12 <= end:
            namesz, descsz, typ = struct.unpack_from("<III", data, p)
            name = data[p + 12:p + 12 + namesz].rstrip(b"\0").decode()
            dp = p + 12 + ((namesz + 3) & ~3)
            if name == "AMDGPU" and typ == NT_AMDGPU_METADATA:
                meta = msgpack_unpack(data[dp:dp + descsz])
                if not isinstance(meta, dict):
                    raise ElfError("NT_AMDGPU_METADATA is not a msgpack map")
                return meta
            p = dp + ((descsz + 3) & ~3)
    raise ElfError("no NT_AMDGPU_METADATA note (was the object built for amdgcn-amd-amdhsa?)")
