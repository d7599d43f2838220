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
_LOCALDECL = re.compile(r"\.local\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$]+)"
                        r"\s*(?:\[\s*(\d+)\s*\])?")


def _split_top(s: str, sep: str = ",") -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in s:
        if c in "[{(":
            depth += 1
        elif c in "]})":
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
    """Register and symbol scopes: `{ }` blocks shadow outer declarations, and an inlined
    function starts from a scope of its own (its registers, parameters and labels renamed)."""

    def __init__(self, body: Body) -> None:
        self.body = body
        self.stack: list[dict[str, int]] = [{}]
        self.syms: list[dict[str, str]] = [{}]
        self.counter = 0
        self.ret_label: str | None = None       # inside an inlined function: where ret goes
        self.inlining: tuple[str, ...] = ()     # the functions being inlined (no recursion)

    def declare_sym(self, name: str) -> str:
        """A symbol (a `.param` or `.local` variable, a label) declared in the current scope:
        its name unique in the kernel."""
        self.counter += 1
        unique = name if self.counter == 1 and len(self.stack) == 1 and not self.inlining \
            else f"{name}@{self.counter}"
        self.syms[-1][name] = unique
        return unique

    def lookup_sym(self, name: str) -> str:
        for scope in reversed(self.syms):
            if name in scope:
                return scope[name]
        return name

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
        self.syms.append({})

    def pop(self, line: int) -> None:
        if len(self.stack) == 1:
            raise PtxSyntaxError(f"line {line}: '}}' closes no scope")
        self.stack.pop()
        self.syms.pop()


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
    if tok.startswith("(") and tok.endswith(")"):   # call's return and argument lists
        return Operand("vec", elems=tuple(_operand(t, sc, line) for t in _split_top(tok[1:-1])),
                       name="()")
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
        return Operand("sym", name=sc.lookup_sym(tok))
    raise PtxSyntaxError(f"line {line}: cannot read operand {tok!r}")


def parse_body(mod: PtxModule, entry: str) -> Body:
    """The instructions of kernel `entry` of a parsed module; calls of device functions are
    inlined (their parameters become per-thread local memory, `ret` a branch to the call's
    end), so control flow stays in code order. Recursive calls and calls of functions without a
    body are left as unsupported `call` instructions."""
    e = mod.entries[entry]
    body = Body(entry)
    sc = _Scopes(body)
    _parse_span(mod, e.body[0], e.body[1], body, sc)
    return body


def _parse_span(mod: PtxModule, start: int, end: int, body: Body, sc: _Scopes) -> None:
    text = mod.text
    line = text.count("\n", 0, start) + 1
    # labels may be used before they are defined: an inlined body's are renamed up front
    if sc.inlining:
        for lab in re.findall(r"(?m)^\s*([\w$.]+)\s*:(?!:)", text[start:end]):
            sc.declare_sym(lab)
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
            body.labels[sc.lookup_sym(m.group(1))] = len(body.instrs)
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


def _local(body: Body, sc: _Scopes, name: str, size: int, align: int) -> str:
    """A per-thread variable in local memory (a `.local` array, a call's `.param`)."""
    unique = sc.declare_sym(name)
    off = -(-body.local_B // max(align, 1)) * max(align, 1)
    body.locals[unique] = (off, size)
    body.local_B = off + size
    return unique


def _copy(body: Body, sc: _Scopes, dst: str, src: str, size: int, line: int, text: str) -> None:
    """Instructions copying `size` bytes from local variable `src` to `dst` (call arguments and
    results), through a scratch register per width."""
    pos = 0
    while pos < size:
        w = next(x for x in (8, 4, 2, 1) if size - pos >= x and pos % x == 0)
        tname = f"%__copy{w}"
        reg = sc.lookup(tname)
        if reg is None:
            sc.stack[0][tname] = reg = len(body.registers)
            body.registers.append(Register(tname, f"b{8 * w}"))
        t = f"b{8 * w}"
        body.instrs.append(Instr("ld", ("local", t), (
            Operand("reg", reg=reg), Operand("addr", base=Operand("sym", name=src), offset=pos)),
            None, line, f"{text} (argument copy)"))
        body.instrs.append(Instr("st", ("local", t), (
            Operand("addr", base=Operand("sym", name=dst), offset=pos), Operand("reg", reg=reg)),
            None, line, f"{text} (argument copy)"))
        pos += w


def _call(flat: str, guard: tuple[int, bool] | None, body: Body, sc: _Scopes, line: int,
          mod: PtxModule) -> None:
    opcode, _, rest = flat.partition(" ")
    parts = _split_top(rest)
    rets: list[str] = []
    if parts and parts[0].startswith("("):
        rets = [sc.lookup_sym(x) for x in _split_top(parts.pop(0)[1:-1])]
    fname = parts.pop(0) if parts else ""
    args = [sc.lookup_sym(x) for x in _split_top(parts.pop(0)[1:-1])] \
        if parts and parts[0].startswith("(") else []
    f = mod.funcs.get(fname)
    why = None if f is not None and f.body is not None else "a function without a body"
    if f is not None and fname in sc.inlining:
        why = "recursion"
    if guard is not None:
        why = "a predicated call"
    if why is not None or f is None or f.body is None:
        body.instrs.append(Instr("call", tuple(opcode.split(".")[1:]) + (f"({why})",), (),
                                 guard, line, flat))
        return
    # a scope of the callee's own: formals and labels renamed, registers fresh
    saved = (sc.stack, sc.syms, sc.ret_label, sc.inlining)
    sc.stack, sc.syms = [{}], [{}]
    sc.inlining = sc.inlining + (fname,)
    formals = [_local(body, sc, p.name, p.size, p.align) for p in f.params]
    results = [_local(body, sc, p.name, p.size, p.align) for p in f.returns]
    if len(args) != len(formals) or len(rets) > len(results):
        sc.stack, sc.syms, sc.ret_label, sc.inlining = saved
        raise PtxSyntaxError(f"line {line}: call of {fname} with {len(args)} arguments, it takes "
                             f"{len(formals)}")
    for a, p, fp in zip(args, formals, f.params):
        _copy(body, sc, p, a, fp.size, line, flat)
    sc.ret_label = sc.declare_sym("$__return")
    _parse_span(mod, f.body[0], f.body[1], body, sc)
    body.labels[sc.ret_label] = len(body.instrs)
    copies = list(zip(rets, results, f.returns))
    sc.stack, sc.syms, sc.ret_label, sc.inlining = saved
    for r, res, fr in copies:
        _copy(body, sc, r, res, fr.size, line, flat)


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
    if flat.startswith((".local", ".param")):
        m = _LOCALDECL.match(flat.replace(".param", ".local", 1))
        if m is None:
            raise PtxSyntaxError(f"line {line}: cannot read declaration {flat!r}")
        align = int(m.group(1) or TYPE_SIZE.get(m.group(2), 1))
        size = TYPE_SIZE.get(m.group(2), 1) * int(m.group(4) or 1)
        _local(body, sc, m.group(3), size, align)
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
    if opcode.split(".")[0] == "call":
        _call(flat, guard, body, sc, line, mod)
        return
    if opcode == "ret" and sc.ret_label is not None:
        body.instrs.append(Instr("bra", (), (Operand("sym", name=sc.ret_label),), guard, line,
                                 flat))
        return
    parts = opcode.split(".")
    args = tuple(_operand(t, sc, line) for t in _split_top(rest)) if rest.strip() else ()
    body.instrs.append(Instr(parts[0], tuple(p for p in parts[1:] if p), args, guard, line,
                             flat))
