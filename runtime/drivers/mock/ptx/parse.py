"""PTX kernel bodies -> instruction lists.

A body is read statement by statement: register declarations (`.reg .b32 %r<6>;` declares %r0 to
%r5), `.local` arrays, labels, scopes (`{ ... }` blocks, whose registers shadow outer ones: each
declaration gets a name unique in the kernel), and instructions with an optional guard predicate
(`@%p1`, `@!%p1`). Instructions keep their opcode split at the dots (`ld.global.v4.b32` ->
"ld", ("global", "v4", "b32")) and their operands parsed (`Operand`); the executor gives them
meaning. Declarations come from `runtime.drivers.nv.ptx` (the driver's loader reads the same
module).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from runtime.drivers.nv.ptx import TYPE_SIZE, PtxModule

SPECIAL_REGS = {
    "%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid", "%smid", "%nsmid",
    "%gridid", "%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi",
    "%lanemask_eq", "%lanemask_lt", "%lanemask_le", "%lanemask_gt", "%lanemask_ge",
    "%dynamic_smem_size", "%total_smem_size", "%clock_hi", "%is_explicit_cluster",
    "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
    "%cluster_nctarank",
}


class PtxSyntaxError(Exception):
    """A statement the parser cannot read; names the line."""


@dataclass(frozen=True)
class Operand:
    """One operand. `kind`: "reg" (`reg` is the register's index), "imm" (`value`: an int, or a
    float's bit pattern with `fbits` 32/64), "special" (`name` like "%tid.x"), "sym" (a variable,
    parameter or label `name`), "addr" (`[base + offset]`: `base` a reg/sym Operand or None),
    "vec" (`elems`), "sink" (`_`). `neg` is a leading `!` (predicates)."""

    kind: str
    reg: int = -1
    value: int = 0
    fbits: int = 0
    name: str = ""
    base: "Operand | None" = None
    offset: int = 0
    elems: tuple["Operand", ...] = ()
    neg: bool = False


@dataclass
class Instr:
    """One instruction: opcode, modifiers, operands, guard (register index, negated) and the
    source line (1-based, in the module)."""

    op: str
    mods: tuple[str, ...]
    args: tuple[Operand, ...]
    guard: tuple[int, bool] | None
    line: int
    text: str

    @property
    def opcode(self) -> str:
        """The full opcode, as written (`ld.global.v4.b32`)."""
        return ".".join((self.op,) + self.mods)


@dataclass
class Register:
    """A declared register: its unique name and PTX type."""

    name: str
    type: str

    @property
    def size(self) -> int:
        return TYPE_SIZE[self.type]


@dataclass
class Body:
    """A kernel body: instructions, label -> instruction index, registers and local arrays
    (name -> (offset in the thread's local memory, size))."""

    name: str
    instrs: list[Instr] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)
    registers: list[Register] = field(default_factory=list)
    locals: dict[str, tuple[int, int]] = field(default_factory=dict)
    local_B: int = 0


_NUM = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F]+[uU]?|0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}|"
                  r"\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|0[bB][01]+|\d+[uU]?)")
_REGDECL = re.compile(r"\.reg\s+(?:\.v\d\s+)?\.(\w+)\s+(.*)")
_LOCALDECL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)\s*(?:\[\s*(\d+)\s*\])?")


def _split_top(s: str, sep: str = ",") -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in s:
        if c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur))
    return [x.strip() for x in out]


class _Scopes:
    def __init__(self, body: Body) -> None:
        self.body = body
        self.stack: list[dict[str, int]] = [{}]
        self.counter = 0

    def declare(self, name: str, type_: str) -> None:
        unique = name if len(self.stack) == 1 else f"{name}@{self.counter}"
        self.stack[-1][name] = len(self.body.registers)
        self.body.registers.append(Register(unique, type_))

    def lookup(self, name: str) -> int | None:
        for scope in reversed(self.stack):
            if name in scope:
                return scope[name]
        return None

    def push(self) -> None:
        self.counter += 1
        self.stack.append({})

    def pop(self, line: int) -> None:
        if len(self.stack) == 1:
            raise PtxSyntaxError(f"line {line}: '}}' closes no scope")
        self.stack.pop()


def _number(tok: str) -> Operand | None:
    m = _NUM.fullmatch(tok)
    if m is None:
        return None
    neg = tok.startswith("-")
    t = tok.lstrip("+-")
    if t[:2] in ("0f", "0F"):
        return Operand("imm", value=int(t[2:], 16), fbits=32)
    if t[:2] in ("0d", "0D"):
        return Operand("imm", value=int(t[2:], 16), fbits=64)
    if "." in t or ("e" in t.lower() and not t.lower().startswith("0x")):
        import struct
        v = float(t) * (-1 if neg else 1)
        return Operand("imm", value=int.from_bytes(struct.pack("<d", v), "little"), fbits=64)
    t = t.rstrip("uU")
    v = int(t[2:], 2) if t[:2] in ("0b", "0B") else int(t, 0)
    return Operand("imm", value=-v if neg else v)


def _operand(tok: str, sc: _Scopes, line: int) -> Operand:
    tok = tok.strip()
    if tok == "_":
        return Operand("sink")
    if tok.startswith("!"):
        o = _operand(tok[1:], sc, line)
        return Operand(o.kind, o.reg, o.value, o.fbits, o.name, o.base, o.offset, o.elems, True)
    if tok.startswith("{"):
        if not tok.endswith("}"):
            raise PtxSyntaxError(f"line {line}: unterminated vector operand {tok!r}")
        return Operand("vec", elems=tuple(_operand(t, sc, line) for t in _split_top(tok[1:-1])))
    if tok.startswith("["):
        if not tok.endswith("]"):
            raise PtxSyntaxError(f"line {line}: unterminated address {tok!r}")
        inner = tok[1:-1].replace(" ", "")
        m = re.fullmatch(r"([%\w$.]+)?(?:\+?(-?(?:0[xX][0-9a-fA-F]+|\d+)))?", inner)
        if m is None or not inner:
            raise PtxSyntaxError(f"line {line}: cannot read address {tok!r}")
        base_s, off_s = m.group(1), m.group(2)
        if base_s is not None and re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|\d+)", base_s):
            return Operand("addr", base=None, offset=int(base_s, 0) + int(off_s or "0", 0))
        base = _operand(base_s, sc, line) if base_s else None
        return Operand("addr", base=base, offset=int(off_s, 0) if off_s else 0)
    if "|" in tok:  # setp's and shfl's two destinations p|q
        return Operand("vec", elems=tuple(_operand(t, sc, line) for t in tok.split("|")),
                       name="|")
    if tok.startswith("%"):
        head = tok.split(".")[0]
        if head in SPECIAL_REGS and sc.lookup(tok) is None:
            return Operand("special", name=tok)
        idx = sc.lookup(tok)
        if idx is None:
            raise PtxSyntaxError(f"line {line}: register {tok} is not declared")
        return Operand("reg", reg=idx)
    num = _number(tok)
    if num is not None:
        return num
    if re.fullmatch(r"[\w$.]+", tok):
        return Operand("sym", name=tok)
    raise PtxSyntaxError(f"line {line}: cannot read operand {tok!r}")


def parse_body(mod: PtxModule, entry: str) -> Body:
    """The instructions of kernel `entry` of a parsed module."""
    e = mod.entries[entry]
    start, end = e.body
    text = mod.text
    body = Body(entry)
    sc = _Scopes(body)
    line = text.count("\n", 0, start) + 1
    pos = start
    while pos < end:
        c = text[pos]
        if c.isspace():
            if c == "\n":
                line += 1
            pos += 1
            continue
        if c == "{":
            sc.push()
            pos += 1
            continue
        if c == "}":
            sc.pop(line)
            pos += 1
            continue
        m = re.match(r"([\w$.]+)\s*:(?!:)", text[pos:pos + 200])
        if m is not None and not text[pos:].startswith(("@", ".")):
            body.labels[m.group(1)] = len(body.instrs)
            pos += m.end()
            line += m.group(0).count("\n")
            continue
        if re.match(r"\.loc\s|\.file\s|@@", text[pos:pos + 8]):
            # debug directives end at the line's end, not at a ';'
            nl = text.find("\n", pos, end)
            pos = end if nl < 0 else nl
            continue
        semi = text.find(";", pos, end)
        if semi < 0:
            raise PtxSyntaxError(f"line {line}: statement without ';'")
        stmt = text[pos:semi]
        _statement(stmt.strip(), body, sc, line, mod)
        line += stmt.count("\n")
        pos = semi + 1
    return body


def _statement(stmt: str, body: Body, sc: _Scopes, line: int, mod: PtxModule) -> None:
    flat = " ".join(stmt.split())
    if flat.startswith(".reg"):
        m = _REGDECL.fullmatch(flat)
        if m is None or m.group(1) not in TYPE_SIZE:
            raise PtxSyntaxError(f"line {line}: cannot read register declaration {flat!r}")
        type_ = m.group(1)
        for part in _split_top(m.group(2)):
            rm = re.fullmatch(r"(%[\w$]+)<(\d+)>", part)
            if rm:
                for i in range(int(rm.group(2))):
                    sc.declare(f"{rm.group(1)}{i}", type_)
            else:
                sc.declare(part, type_)
        return
    if flat.startswith(".local"):
        m = _LOCALDECL.match(flat)
        if m is None:
            raise PtxSyntaxError(f"line {line}: cannot read local declaration {flat!r}")
        align = int(m.group(1) or TYPE_SIZE.get(m.group(2), 1))
        size = TYPE_SIZE.get(m.group(2), 1) * int(m.group(4) or 1)
        off = -(-body.local_B // align) * align
        body.locals[m.group(3)] = (off, size)
        body.local_B = off + size
        return
    if flat.startswith((".shared", ".pragma", ".loc", ".file", ".section", ".maxnreg",
                        ".maxntid", ".reqntid", ".minnctapersm", ".noreturn")):
        return  # entry-scope shared variables are laid out by the module (ptx.shared_layout)
    if flat.startswith("."):
        raise PtxSyntaxError(f"line {line}: unsupported directive {flat.split()[0]}")
    guard = None
    if flat.startswith("@"):
        g, _, flat = flat.partition(" ")
        neg = g.startswith("@!")
        idx = sc.lookup(g[2:] if neg else g[1:])
        if idx is None:
            raise PtxSyntaxError(f"line {line}: guard {g} names no declared predicate")
        guard = (idx, neg)
        flat = flat.strip()
    opcode, _, rest = flat.partition(" ")
    parts = opcode.split(".")
    args = tuple(_operand(t, sc, line) for t in _split_top(rest)) if rest.strip() else ()
    body.instrs.append(Instr(parts[0], tuple(p for p in parts[1:] if p), args, guard, line,
                             flat))
