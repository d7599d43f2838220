"""PTX modules as load images: what a GPU that executes PTX (the mock NVIDIA GPU) is given instead
of a cubin's SASS.

`parse_module(text)` reads a module's declarations: its target, its entry points with their
parameters (offsets from the `.param` declarations, laid out with the CUDA ABI: each parameter at
the next multiple of its alignment, so they land where a cubin's EIATTR_KPARAM_INFO puts them),
and its module-scope variables (`.global`, `.const`, `.shared`). Instruction bodies are kept as
text spans; executing them is the GPU's business.

`load_info(blob, sm)` turns a module into the `cubin.Cubin` shape the program loader already
understands, with one synthetic section per part of the image:

    +0                 .ptx         the module text, NUL-terminated
    round_up(128)      .ptx.data    `.global` and `.const` variables with their initializers, each
                                    at its declared alignment (`data_layout`)
    round_up(128)      .text.<k>    one 128-byte aligned entry record per kernel

The QMD's program address is the kernel's entry record (the cubin path puts SASS there):

    "\\x7fPTX" u16 version, u16 len(name), u32 module size, u32 data offset (from the image start),
    i64 image start - record address, u32 shared base, u32 static shared end, then the name

`shared base` is where the module's static `.shared` variables begin (after the 1 KiB sm_90
reserves per CTA), `static shared end` where dynamic (`.extern .shared`) memory begins. A GPU
recognises a PTX kernel by the magic at its program address.
"""
from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

from runtime.drivers.nv import cubin
from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import round_up

ENTRY_MAGIC = b"\x7fPTX"
ENTRY_VERSION = 1
ENTRY_HEADER = struct.Struct("<4sHHIIqII")
IMAGE_ALIGN_B = 128

# Byte size of each PTX fundamental type.
TYPE_SIZE = {
    "pred": 1, "b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
    "f16x2": 4, "bf16x2": 4, "b32": 4, "u32": 4, "s32": 4, "f32": 4, "tf32": 4, "b64": 8,
    "u64": 8, "s64": 8, "f64": 8, "b128": 16, "e4m3x2": 2, "e5m2x2": 2,
}

_LINE_DIRECTIVES = re.compile(r"^[ \t]*(?:\.loc\s|\.file\s|@@)[^\n]*", re.M)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_VAR = re.compile(
    r"(?P<link>(?:\.(?:visible|extern|weak|common)\s+)*)\.(?P<space>global|const|shared)\s+"
    r"(?:\.align\s+(?P<align>\d+)\s+)?(?:\.(?:v2|v4)\s+)?\.(?P<type>\w+)\s+"
    r"(?P<name>[\w$.%]+)(?P<dims>(?:\s*\[\s*\d*\s*\])*)\s*(?:=\s*(?P<init>[^;]*))?;")
_ENTRY = re.compile(r"(?:\.(?:visible|extern|weak)\s+)*\.entry\s+(?P<name>[\w$]+)\s*"
                    r"(?:\((?P<params>[^)]*)\))?(?P<dirs>[^{;]*)(?P<end>[{;])")
# `.ptr .global .align N` after the type describes the pointee, not the parameter.
_PTR_ATTR = r"(?:\.ptr(?:\s+\.(?:global|const|local|shared))?(?:\s+\.align\s+\d+)?\s+)?"
_FUNC = re.compile(r"(?:\.(?:visible|extern|weak)\s+)*\.func\s+(?:\((?P<rets>[^)]*)\)\s*)?"
                   r"(?P<name>[\w$]+)\s*(?:\((?P<params>[^)]*)\))?")
_PARAM = re.compile(r"\.param\s+(?:\.align\s+(?P<align>\d+)\s+)?\.(?P<type>\w+)\s+" + _PTR_ATTR
                    + r"(?P<name>[\w$]+)(?:\s*\[\s*(?P<count>\d+)\s*\])?")


@dataclass(frozen=True)
class PtxParam:
    """One kernel parameter: byte offset in the parameter block, size and alignment."""

    name: str
    offset: int
    size: int
    align: int


@dataclass(frozen=True)
class PtxVar:
    """A module-scope variable: state space, alignment, size in bytes and initial bytes."""

    name: str
    space: str
    align: int
    size: int
    init: bytes
    extern: bool


@dataclass
class PtxEntry:
    """A kernel: its parameters and the text span of its body (between the braces)."""

    name: str
    params: list[PtxParam]
    body: tuple[int, int]
    maxntid: tuple[int, ...] = ()
    reqntid: tuple[int, ...] = ()

    @property
    def param_size(self) -> int:
        """Bytes of the parameter block (the end of the last parameter)."""
        return max((p.offset + p.size for p in self.params), default=0)


@dataclass
class PtxFunc:
    """A device function (`.func`): its return and formal parameters and its body's text span
    (None for a declaration without a body, such as `vprintf`)."""

    name: str
    returns: list[PtxParam]
    params: list[PtxParam]
    body: tuple[int, int] | None


@dataclass
class PtxModule:
    """A PTX module's declarations (`text` is the module with comments blanked out, same
    offsets as the source)."""

    text: str
    version: str
    target: int
    address_size: int
    entries: dict[str, PtxEntry]
    variables: dict[str, PtxVar]
    local_shared: dict[str, list[PtxVar]] = field(default_factory=dict)  # per entry
    funcs: dict[str, PtxFunc] = field(default_factory=dict)

    def data_layout(self) -> tuple[dict[str, int], int]:
        """Offsets of the `.global` and `.const` variables in the data area, and its size."""
        out, pos = {}, 0
        for v in self.variables.values():
            if v.space in ("global", "const") and not v.extern:
                pos = round_up(pos, max(v.align, 1))
                out[v.name] = pos
                pos += v.size
        return out, pos

    def shared_layout(self, entry: str, base: int) -> tuple[dict[str, int], int]:
        """Offsets in a CTA's shared memory of the static `.shared` variables an entry sees (the
        module's and its own, from `base`), every dynamic one at the returned static end."""
        out, pos = {}, base
        statics = [v for v in self.variables.values() if v.space == "shared" and not v.extern]
        for v in statics + self.local_shared.get(entry, []):
            pos = round_up(pos, max(v.align, 1))
            out[v.name] = pos
            pos += v.size
        end = round_up(pos, 16)
        for v in self.variables.values():
            if v.space == "shared" and v.extern:
                out[v.name] = end
        return out, end


def is_ptx(blob: bytes) -> bool:
    """True for PTX text (as NVRTC and Triton write it), False for an ELF cubin or anything
    else."""
    if blob[:4] == cubin.ELF_MAGIC:
        return False
    head = blob[:4096].lstrip()
    return b".version" in head and b".target" in head


def _int_list(text: str) -> tuple[int, ...]:
    return tuple(int(x, 0) for x in re.findall(r"\w+", text))


def _init_bytes(init: str | None, type_: str, size: int, name: str) -> bytes:
    if init is None:
        return bytes(size)
    items = [s.strip() for s in init.strip().strip("{}").replace("{", "").replace("}", "")
             .split(",") if s.strip()]
    elem = TYPE_SIZE.get(type_, 1)
    out = bytearray()
    for it in items:
        if type_.startswith("f") and not re.fullmatch(r"0[fFdD][0-9a-fA-F]+", it):
            fmt = {4: "<f", 8: "<d"}.get(elem)
            if fmt is None:
                raise ProgramError(f"PTX variable {name}: initializer {it!r} for .{type_}")
            out += struct.pack(fmt, float(it))
            continue
        try:
            v = int(it[2:], 16) if re.fullmatch(r"0[fFdD][0-9a-fA-F]+", it) else int(it, 0)
        except ValueError:
            raise ProgramError(f"PTX variable {name}: initializer {it!r} is not a constant "
                               "(addresses of other variables are not supported)") from None
        out += (v & ((1 << (8 * elem)) - 1)).to_bytes(elem, "little")
    return bytes(out[:size]) + bytes(max(0, size - len(out)))


def _var(m: re.Match[str]) -> PtxVar:
    type_ = m.group("type")
    elem = TYPE_SIZE.get(type_)
    if elem is None:
        raise ProgramError(f"PTX variable {m.group('name')}: unknown type .{type_}")
    count = 1
    for d in re.findall(r"\[\s*(\d*)\s*\]", m.group("dims") or ""):
        count *= int(d) if d else 0
    size = elem * count
    align = int(m.group("align") or elem)
    link = m.group("link") or ""
    return PtxVar(m.group("name"), m.group("space"), align, size,
                  _init_bytes(m.group("init"), type_, size, m.group("name")), ".extern" in link)


def _params(text: str, where: str) -> list[PtxParam]:
    out, pos = [], 0
    for piece in [p for p in text.split(",") if p.strip()]:
        m = _PARAM.search(piece)
        if m is None:
            raise ProgramError(f"{where}: cannot read parameter {piece.strip()!r}")
        elem = TYPE_SIZE.get(m.group("type"))
        if elem is None:
            raise ProgramError(f"{where}: parameter {m.group('name')} has unknown type "
                               f".{m.group('type')}")
        size = elem * int(m.group("count") or 1)
        align = int(m.group("align") or elem)
        pos = round_up(pos, align)
        out.append(PtxParam(m.group("name"), pos, size, align))
        pos += size
    return out


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ProgramError("PTX module: unbalanced braces (truncated text?)")


def parse_module(source: str) -> PtxModule:
    """Reads the declarations of a PTX module; raises `ProgramError` naming what it could not
    read."""
    text = _COMMENTS.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)
    # Debug directives end at the line's end, without ';': blank them out too.
    text = _LINE_DIRECTIVES.sub(lambda m: " " * len(m.group(0)), text)
    ver = re.search(r"\.version\s+(\d+\.\d+)", text)
    tgt = re.search(r"\.target\s+sm_(\d+)", text)
    if ver is None or tgt is None:
        raise ProgramError("not a PTX module: no .version or .target sm_XX directive")
    asz = re.search(r"\.address_size\s+(\d+)", text)
    mod = PtxModule(text, ver.group(1), int(tgt.group(1)), int(asz.group(1)) if asz else 64,
                    {}, {})
    if mod.address_size != 64:
        raise ProgramError(f"PTX .address_size {mod.address_size}: only 64-bit code is supported")
    pos = 0
    while pos < len(text):
        brace = text.find("{", pos)
        semi = text.find(";", pos)
        if semi < 0 and brace < 0:
            break
        # the next top-level statement: a declaration ending in ';' (an initializer's braces
        # included) or a body in braces
        end = semi if brace < 0 or (0 <= semi < brace) else brace
        if end == brace and "=" in text[pos:brace]:
            end = text.find(";", _matching_brace(text, brace))
            if end < 0:
                raise ProgramError("PTX module: an initializer is not closed by ';'")
        stmt = text[pos:end + 1]
        m = _ENTRY.search(stmt) if ".entry" in stmt else None
        fm = _FUNC.search(stmt) if ".func" in stmt and m is None else None
        if fm is not None:
            close = _matching_brace(text, brace) if end == brace else None
            where = f"function {fm.group('name')}"
            mod.funcs[fm.group("name")] = PtxFunc(
                fm.group("name"), _params(fm.group("rets") or "", where),
                _params(fm.group("params") or "", where),
                (brace + 1, close) if close is not None else None)
            pos = (close if close is not None else end) + 1
            continue
        if end == brace:
            close = _matching_brace(text, brace)
            if m is not None:
                ent = PtxEntry(m.group("name"), _params(m.group("params") or "",
                                                      f"kernel {m.group('name')}"),
                             (brace + 1, close))
                dirs = m.group("dirs")
                for d, attr in (("maxntid", "maxntid"), ("reqntid", "reqntid")):
                    dm = re.search(r"\." + d + r"\s+([\d\s,]+)", dirs)
                    if dm:
                        setattr(ent, attr, _int_list(dm.group(1)))
                mod.entries[ent.name] = ent
                body = text[brace + 1:close]
                mod.local_shared[ent.name] = [_var(v) for v in _VAR.finditer(body)
                                            if v.group("space") == "shared"]
            pos = close + 1
            continue
        vm = _VAR.search(stmt)
        if vm is not None and ".func" not in stmt and ".entry" not in stmt:
            v = _var(vm)
            mod.variables[v.name] = v
        pos = end + 1
    return mod


def entry_record(mod: PtxModule, entry: str, module_size: int, data_off: int, rel: int,
                 shared_base: int) -> bytes:
    """The entry record of kernel `entry` (see the module docstring)."""
    _, static_end = mod.shared_layout(entry, shared_base)
    name = entry.encode()
    return ENTRY_HEADER.pack(ENTRY_MAGIC, ENTRY_VERSION, len(name), module_size, data_off, rel,
                             shared_base, static_end) + name


def load_info(blob: bytes, sm: int) -> tuple[cubin.Cubin, PtxModule]:
    """A PTX module as a `Cubin` the program loader places in GPU memory (see the module
    docstring for the image), for a GPU of architecture `sm`."""
    try:
        source = blob.rstrip(b"\0").decode()
    except UnicodeDecodeError as e:
        raise ProgramError(f"PTX module is not UTF-8 text: {e}") from None
    mod = parse_module(source)
    if mod.target > sm:
        raise ProgramError(f"the PTX is for sm_{mod.target}, the GPU is sm_{sm}: it cannot run "
                           "code for a newer architecture")
    text = source.encode() + b"\0"
    sections: list[cubin.Section] = [cubin.Section(0, "", 0, 0, 0, 0, 0, 0, 0, b"")]
    layout: dict[int, int] = {}

    def add(name: str, data: bytes, at: int) -> cubin.Section:
        sec = cubin.Section(len(sections), name, 1, cubin.SHF_ALLOC, 0, len(data), 0, 0,
                            IMAGE_ALIGN_B, data)
        sections.append(sec)
        layout[sec.index] = at
        return sec

    add(".ptx", text, 0)
    data_off = round_up(len(text), IMAGE_ALIGN_B)
    offs, data_size = mod.data_layout()
    data = bytearray(data_size)
    for name, off in offs.items():
        v = mod.variables[name]
        data[off:off + v.size] = v.init
    add(".ptx.data", bytes(data), data_off)
    pos = round_up(data_off + data_size, IMAGE_ALIGN_B)
    shared_base = cubin.RESERVED_SMEM_B if sm >= 90 else 0
    kernels: dict[str, cubin.KernelInfo] = {}
    for ent in mod.entries.values():
        rec = entry_record(mod, ent.name, len(text), data_off, -pos, shared_base)
        sec = add(f".text.{ent.name}", rec, pos)
        _, static_end = mod.shared_layout(ent.name, shared_base)
        k = cubin.KernelInfo(ent.name, sec)
        # Registers and barriers are what a launch of this size may use; the interpreter keeps
        # its own register file and barrier state.
        k.registers, k.barriers = 32, 1
        k.static_smem_B = static_end
        k.param_size = ent.param_size
        k.params = [cubin.KernelParam(i, p.offset, p.size) for i, p in enumerate(ent.params)]
        k.reqntid = ent.reqntid
        if ent.maxntid:
            k.max_threads = 1
            for x in ent.maxntid:
                k.max_threads *= max(x, 1)
        kernels[ent.name] = k
        pos = round_up(pos + len(rec), IMAGE_ALIGN_B)
    cub = cubin.Cubin(sm, 0, sections, [], kernels, {}, [], layout, pos)
    return cub, mod


def read_entry_record(raw: bytes) -> tuple[str, int, int, int, int, int] | None:
    """Decodes an entry record: (kernel name, module size, data offset, image start relative to
    the record, shared base, static shared end), or None when `raw` is not one."""
    if len(raw) < ENTRY_HEADER.size or raw[:4] != ENTRY_MAGIC:
        return None
    _, ver, nlen, msize, doff, rel, sbase, send = ENTRY_HEADER.unpack_from(raw)
    if ver != ENTRY_VERSION:
        return None
    name = raw[ENTRY_HEADER.size:ENTRY_HEADER.size + nlen].decode(errors="replace")
    return name, msize, doff, rel, sbase, send
