"""The translator: drives expansion, parsing and evaluation per macro in dependency order and
sorts each emitted macro into constants, ioctls, functions or skipped.
"""

from __future__ import annotations

import gc
import keyword
import re
from typing import Callable, Iterable, Sequence

from .. import ir
from .model import CType, MACRO_HELPERS, MacroContext, MacroDef, MacroOptions, MacroResult, _Fail
from .ctype import _INT, _STD_TYPES
from .tokens import (
    _ATTRIBUTE_WORDS,
    _ID,
    _IOCTL_DIRS,
    _KEYWORDS,
    _MAX_DEPTH,
    _NODE,
    _NUM,
    _PUNCT,
    _P_PRIMARY,
    _STATEMENT_PUNCT,
    _STATEMENT_WORDS,
    _TAGS,
    _TYPE_WORDS,
    _Tok,
    _fully_parenthesized,
    _is_punct,
    _kind_of,
    _with_hide,
    tokenize,
)
from .literals import _number
from .emit import _py_literal
from .nodes import _Binary, _Call, _Ioctl, _Lit, _MacroRef, _Node, _Param, _unwrap
from .parser import _Parser
from .preprocess import _GCC_BUILTINS, _Macro, _Preprocessor, _parse_predefined_key


class _ObjMemo:
    """An object-like macro, evaluated once: ``root`` (or a bit range ``rng``) or ``fail``."""

    __slots__ = ("root", "prec", "rng", "fail")

    def __init__(self) -> None:
        self.root: _Node | None = None
        self.prec = _P_PRIMARY
        self.rng: tuple[_Node, _Node] | None = None
        self.fail: _Fail | None = None


class _FuncMemo:
    """A function-like macro translated to Python once."""

    __slots__ = ("params", "body", "ret", "atomic", "is_range", "guarded", "fail")

    def __init__(self) -> None:
        self.params: tuple[str, ...] = ()
        self.body = ""
        self.ret: CType | None = None
        self.atomic = False  # body is one token or fully parenthesized
        self.is_range = False
        self.guarded = False  # every parameter use is written "(p)"
        self.fail: _Fail | None = None


class _Translator(_Preprocessor):
    def __init__(
        self,
        macros: Sequence[MacroDef],
        ctx: MacroContext,
        opts: MacroOptions,
        emit: Callable[[str], bool],
    ) -> None:
        self.ctx, self.opts, self._emit_fn = ctx, opts, emit
        self.interned: dict[str, _Tok] = {}
        self.literals: dict[str, _Lit | _Fail] = {}
        self.table: dict[str, _Macro] = {}
        for name, text in _GCC_BUILTINS.items():
            self.table[name] = _Macro(name, None, tokenize(text), self.interned)
        self.last: dict[str, int] = {}  # name → index of its last definition in ``macros``
        for i, md in enumerate(macros):
            self.table[md.name] = _Macro(md.name, md.params, md.body, self.interned)
            self.last[md.name] = i
        for key, text in opts.predefined.items():
            name, params = _parse_predefined_key(key)
            self.table[name] = _Macro(name, params, tokenize(text), self.interned)
        self.wrappers = frozenset(opts.range_wrappers)
        for w in opts.range_wrappers:  # MW(x) expands to x, whatever the headers say
            self.table[w] = _Macro(w, ("x",), ("x",), self.interned)
        self.enums: dict[str, tuple[int, CType]] = {}
        for name, (v, ct) in ctx.enum_constants.items():
            if not ct.is_float and -(1 << 31) <= v < 1 << 31:
                ct = _INT
            self.enums[name] = (v, ct)
        self.skip_rules = [(re.compile(rx), reason) for rx, reason in opts.skip]
        self.obj_memo: dict[str, _ObjMemo] = {}
        self.fn_memo: dict[str, _FuncMemo] = {}
        self.in_progress: set[str] = set()
        self.fn_in_progress: set[str] = set()
        self.depth = 0
        self.params_in_scope: frozenset[str] = frozenset()
        self._emit_cache: dict[str, bool] = {}
        self._output_cache: dict[str, bool] = {}
        self._const_cache: dict[str, bool] = {}

    # -- what is emitted

    def emits(self, name: str) -> bool:
        r = self._emit_cache.get(name)
        if r is None:
            r = self._emit_cache[name] = bool(self._emit_fn(name))
        return r

    def skip_reason(self, name: str) -> str | None:
        for rx, reason in self.skip_rules:
            if rx.search(name):
                return reason
        return None

    def will_output(self, name: str) -> bool:
        """Whether the generated module will define ``name`` from its table definition."""
        r = self._output_cache.get(name)
        if r is None:
            r = (
                name in self.last
                and self.emits(name)
                and name not in self.wrappers
                and self.skip_reason(name) is None
            )
            self._output_cache[name] = r
        return r

    def is_output_constant(self, name: str) -> bool:
        """Whether ``name`` becomes an ``ir.Constant`` (so function bodies may use the name)."""
        r = self._const_cache.get(name)
        if r is None:
            r = False
            if (
                self.will_output(name)
                and self.table[name].params is None
                and not keyword.iskeyword(name)
            ):
                memo = self.object_memo(name)
                root = memo.root
                if (
                    root is not None
                    and memo.fail is None
                    and not isinstance(_unwrap(root), _Ioctl)
                    and (root.is_str or (root.ctype is not None and not root.ctype.is_pointer))
                ):
                    try:
                        root.value()
                        r = True
                    except _Fail:
                        pass
            self._const_cache[name] = r
        return r

    # -- names

    def number(self, text: str) -> _Lit:
        """A numeric literal's node; shared, as nodes are immutable once evaluated."""
        lit = self.literals.get(text)
        if lit is None:
            try:
                lit = _number(text)
            except _Fail as f:
                lit = f.with_traceback(None)
            self.literals[text] = lit
        if isinstance(lit, _Fail):
            raise _Fail(lit.reason, lit.contextual)
        return lit

    def lookup_type(self, name: str) -> CType | None:
        ct = self.ctx.types.get(name)
        return ct if ct is not None else _STD_TYPES.get(name)

    def is_typedef(self, w: str) -> bool:
        return w not in self.enums and (w in self.ctx.types or w in _STD_TYPES)

    def identifier(self, name: str, called: bool) -> _Node:
        e = self.enums.get(name)
        if e is not None:
            return _Lit(e[0], e[1])  # inlined: enum constants may not exist in the module
        if name in _ATTRIBUTE_WORDS:
            raise _Fail(f"uses {name}", True)
        m = self.table.get(name)
        if called:
            if m is not None:
                raise _Fail(f"recursive use of {name}")
            if name.startswith("__builtin"):
                raise _Fail(f"calls {name}")
            raise _Fail(f"calls undefined function {name}")
        if m is not None:
            if m.params is not None:
                raise _Fail(f"uses function-like macro {name} without arguments", True)
            raise _Fail(f"recursive reference to {name}")
        if name in _IOCTL_DIRS:
            raise _Fail(f"uses {name} without arguments", True)
        if self.is_typedef(name):
            raise _Fail(f"uses type {name} as a value", True)
        if name in _KEYWORDS or name in _TYPE_WORDS or name in _STATEMENT_WORDS or name in _TAGS:
            raise _Fail(f"uses keyword {name}", True)
        for tag in _TAGS:
            if f"{tag} {name}" in self.ctx.types:
                # `#define __snd_pcm_sync_ptr snd_pcm_sync_ptr`: renames a tag, used after `struct`
                raise _Fail(f"names the tag of {tag} {name} (a type, not a value)", True)
        raise _Fail(f"references undefined {name}")

    # -- preparation in dependency order

    def prepare(self, roots: Iterable[str]) -> None:
        """Evaluate every macro reachable from ``roots`` after its dependencies (explicit stack)."""
        state: dict[str, int] = {}
        table = self.table
        for root in roots:
            if root in state or root not in table:
                continue
            state[root] = 1
            deps = self._deps(root)
            if not deps:  # the common case (a literal): no stack needed
                state[root] = 2
                self._prepare_one(root)
                continue
            stack = [(root, iter(deps))]
            while stack:
                name, it = stack[-1]
                for d in it:
                    if d not in state:
                        state[d] = 1
                        stack.append((d, iter(self._deps(d))))
                        break
                else:
                    stack.pop()
                    state[name] = 2
                    self._prepare_one(name)

    def _prepare_one(self, name: str) -> None:
        if self.table[name].params is None:
            self.object_memo(name)
        elif self.will_output(name):
            self.function_memo(name)

    def _deps(self, name: str) -> list[str]:
        table = self.table  # spellings suffice: literals and punctuators are never macro names
        return [s for s in table[name].raw if s in table]

    # -- object-like macros

    def object_memo(self, name: str) -> _ObjMemo:
        memo = self.obj_memo.get(name)
        if memo is not None:
            return memo
        memo = _ObjMemo()
        if self.depth > _MAX_DEPTH:
            memo.fail = _Fail("macro nesting too deep")
            return memo  # not cached: it depends on where it was reached from
        self.in_progress.add(name)
        self.depth += 1
        try:
            self._fill_object(self.table[name], memo)
        except RecursionError:
            memo.fail = _Fail("expression nested too deeply")
        finally:
            self.in_progress.discard(name)
            self.depth -= 1
        self.obj_memo[name] = memo
        return memo

    def _fill_object(self, m: _Macro, memo: _ObjMemo) -> None:
        try:
            raw = m.raw
            if not raw:
                raise _Fail("empty", True)
            # Fast paths for the bulk of register headers: "0x10", "(0x10)", "31:16".
            n = len(raw)
            if n == 1 and _kind_of(raw[0]) == _NUM:
                memo.root = self.number(raw[0])
                return
            if n == 3 and _kind_of(raw[1]) == _NUM:
                if raw[0] == "(" and raw[2] == ")":
                    memo.root = self.number(raw[1])
                    return
            if (
                n == 3
                and raw[1] == ":"
                and self.opts.bit_ranges
                and _kind_of(raw[0]) == _NUM
                and _kind_of(raw[2]) == _NUM
            ):
                memo.rng = (self.number(raw[0]), self.number(raw[2]))
                return
            if m.statement:
                raise _Fail("statement body", True)
            # No hide set is needed: ``in_progress`` keeps the name from expanding inside itself.
            body = self.substitute(m, [], False) if m.has_paste else list(m.toks)
            expanded = self.expand(body, False, False)
            try:
                root, rng = self.parse_top(expanded)
            except _Fail as f:
                raise self._refine(f, expanded) from None
            memo.root, memo.rng = root, rng
            if root is not None:
                memo.prec = self._prec_of(expanded, root)
                try:
                    root.value()  # evaluate now: later uses hit the cache, recursion stays shallow
                except _Fail:
                    pass  # an evaluation error only matters where the value is used
        except _Fail as f:
            memo.fail = f.with_traceback(None)

    @staticmethod
    def _prec_of(expanded: list[_Tok], root: _Node) -> int:
        if len(expanded) == 1:
            return expanded[0].prec
        if _fully_parenthesized(expanded):
            return _P_PRIMARY
        return root.prec

    @staticmethod
    def _check_statement(toks: Iterable[_Tok]) -> None:
        for t in toks:
            if (t.kind == _PUNCT and t.text in _STATEMENT_PUNCT) or (
                t.kind == _ID and t.text in _STATEMENT_WORDS
            ):
                raise _Fail("statement body", True)

    def _refine(self, f: _Fail, toks: list[_Tok]) -> _Fail:
        """Name what a non-expression body is instead of reporting a parse error."""
        if not f.contextual or not toks:
            return f
        try:
            self._check_statement(toks)
        except _Fail as g:
            return g
        if any(t.kind == _ID and t.text in _ATTRIBUTE_WORDS for t in toks):
            return _Fail("expands to an attribute", True)
        p = _Parser(toks, self)
        try:
            p.type_name()
            if p.at_end():
                return _Fail("expands to a type", True)
        except _Fail:
            pass
        if toks[0].kind == _ID and toks[0].text in _KEYWORDS:
            return _Fail("expands to a keyword", True)
        return f

    def parse_top(self, toks: list[_Tok]) -> tuple[_Node | None, tuple[_Node, _Node] | None]:
        if not toks:
            raise _Fail("empty", True)
        p = _Parser(toks, self)
        e = p.expression()
        if p.punct(":"):
            if not self.opts.bit_ranges:
                raise _Fail("bit range 'hi:lo' (bit_ranges is off)", True)
            p.pos += 1
            lo = p.expression()
            if not p.at_end():
                raise p.unexpected()
            return None, (e, lo)
        if not p.at_end():
            raise p.unexpected()
        return e, None

    def parse_full(self, toks: list[_Tok]) -> _Node:
        p = _Parser(toks, self)
        e = p.expression()
        if not p.at_end():
            raise p.unexpected()
        return e

    # -- function-like macros

    def function_memo(self, name: str) -> _FuncMemo | None:
        memo = self.fn_memo.get(name)
        if memo is not None:
            return memo
        if name in self.fn_in_progress or self.depth > _MAX_DEPTH:
            return None
        memo = _FuncMemo()
        self.fn_in_progress.add(name)
        self.depth += 1
        saved = self.params_in_scope
        try:
            self._fill_function(self.table[name], memo)
        except _Fail as f:
            memo.fail = f.with_traceback(None)
        except RecursionError:
            memo.fail = _Fail("expression nested too deeply")
        finally:
            self.fn_in_progress.discard(name)
            self.depth -= 1
            self.params_in_scope = saved
        self.fn_memo[name] = memo
        return memo

    def _fill_function(self, m: _Macro, memo: _FuncMemo) -> None:
        if m.variadic:
            raise _Fail("variadic")
        if not m.raw:
            raise _Fail("empty")
        if m.statement:
            raise _Fail("statement body")
        assert m.params is not None
        py: list[str] = []
        for p in m.params:
            q = p
            while keyword.iskeyword(q) or q in MACRO_HELPERS or q in ("int", "float") or q in py:
                q += "_"
            py.append(q)
        self.params_in_scope = frozenset(py)
        args = [[_Tok(_NODE, q, node=_Param(q))] for q in py]
        body = self.substitute(m, args, True)
        expanded = self.expand(_with_hide(body, frozenset((m.name,))), False, True)
        try:
            root, rng = self.parse_top(expanded)
        except _Fail as f:
            raise self._refine(f, expanded) from None
        if rng is not None:
            code = f"({rng[0].code()}, {rng[1].code()})"
            memo.is_range = True
        else:
            assert root is not None
            if root.ctype is not None and root.ctype.is_pointer:
                raise _Fail("pointer-valued cast")
            code = _return_code(root)
            memo.ret = root.ctype
            memo.atomic = len(expanded) == 1 or _fully_parenthesized(expanded)
            if py and any(h in code for h in ("_c_arg(", "_c_op(", "_c_un(")):
                typed = self._int_typed_code(m, py)
                if typed is not None and typed[0] != code:
                    # Plain int arguments (the common call) take C's int arithmetic, spelled as
                    # object-like macros are: the typed helpers cost many times more per call.
                    code = f"({typed[0]} if {_fast_guard(py, typed[1])} else {code})"
        src = f"def _f({', '.join(py)}):\n    return {code}\n"
        try:
            compile(src, f"<macro {m.name}>", "exec")
        except SyntaxError as e:  # a bug here, not in the header: say so precisely
            raise _Fail(f"generated invalid Python ({e.msg})") from None
        toks = m.toks
        memo.guarded = all(
            0 < i < len(toks) - 1 and _is_punct(toks[i - 1], "(") and _is_punct(toks[i + 1], ")")
            for i, t in enumerate(toks)
            if t.kind == _ID and t.text in m.index
        )
        memo.params, memo.body = tuple(py), code

    def _int_typed_code(self, m: _Macro, py: list[str]) -> tuple[str, bool] | None:
        """The body translated with every parameter an ``int`` and whether that code is also
        exact for arguments in [0, 2**32) (see :func:`_exact_unsigned`), or None where the
        translation fails."""
        args = [[_Tok(_NODE, q, node=_Param(q, _INT))] for q in py]
        body = self.substitute(m, args, True)
        expanded = self.expand(_with_hide(body, frozenset((m.name,))), False, True)
        try:
            root, rng = self.parse_top(expanded)
            if rng is not None or root is None:
                return None
            return _return_code(root), _exact_unsigned(root)
        except _Fail:
            return None

    def _call_token(self, name: str, args: list[list[_Tok]]) -> _Tok | None:
        """A by-name call of an emitted function macro, where that equals textual expansion."""
        if name in self.params_in_scope or not self.will_output(name):
            return None
        memo = self.function_memo(name)
        if memo is None or memo.fail is not None or memo.is_range or not memo.atomic:
            return None
        nodes: list[_Node] = []
        for a in args:
            expanded = self.expand(list(a), True, True)
            # An unparenthesized use of a parameter would regroup a compound argument.
            if not memo.guarded and len(expanded) != 1 and not _fully_parenthesized(expanded):
                return None
            try:
                node = self.parse_full(expanded)
            except _Fail:
                return None  # not a value on its own (a type, a range): expand textually
            # The callee's Python body types its arguments by value (an int in int range is an
            # int), so arguments whose type is unknown anyway (they involve the caller's
            # parameters) and int-typed ones that depend on them go by name; another typed
            # argument is expanded in place, where its type wraps results as C would.
            if node.is_str or (node.ctype is not None and (node.closed or node.ctype != _INT)):
                return None
            nodes.append(node)
        if len(nodes) != len(memo.params):
            return None
        return _Tok(_NODE, name, node=_Call(name, nodes, memo.ret))


    # -- output

    def run(self, macros: Sequence[MacroDef]) -> MacroResult:
        emit_fn, cache = self._emit_fn, self._emit_cache
        for md in macros:
            if md.name not in cache:
                cache[md.name] = bool(emit_fn(md.name))
        emitted = [i for i, md in enumerate(macros) if cache[md.name]]
        self.prepare(macros[i].name for i in emitted)
        res = MacroResult()
        for i in emitted:
            self._classify(i, macros[i], macros, res)
        return res

    def _classify(self, i: int, md: MacroDef, macros: Sequence[MacroDef], res: MacroResult) -> None:
        name, loc = md.name, md.loc
        m = self.table[name]
        reason = self.skip_reason(name) if self.skip_rules else None
        if reason is None and self.last[name] != i:
            last = macros[self.last[name]]
            same = (last.params, self.table[name].raw) == (
                md.params,
                _Macro(name, md.params, md.body, self.interned).raw,
            )
            reason = f"{'defined again' if same else 'redefined'} at {last.loc or 'a later line'}"
        if reason is None and name in self.wrappers:
            reason = "range wrapper (transparent)"
        if reason is None and m.params is not None:
            fm = self.function_memo(name)
            assert fm is not None
            if fm.fail is None:
                res.functions.append(ir.MacroFunction(name, fm.params, fm.body, loc))
                return
            reason = fm.fail.reason
        if reason is None:
            reason = self._classify_object(name, loc, res)
        if reason is not None:
            what = "macro" if m.params is None else "function-macro"
            res.skipped.append(ir.Skipped(name, what, reason, loc))

    def _classify_object(self, name: str, loc: ir.Location | None, res: MacroResult) -> str | None:
        """Append the macro's constant or ioctl; or return why it has none."""
        memo = self.object_memo(name)
        try:
            if memo.fail is not None:
                raise memo.fail
            if memo.rng is not None:
                hi, lo = memo.rng[0].value(), memo.rng[1].value()
                if not isinstance(hi, int) or not isinstance(lo, int):
                    raise _Fail("bit range bounds are not integers")
                res.constants.append(ir.Constant(name, f"({hi}, {lo})", (hi, lo), loc))
                return None
            root = memo.root
            assert root is not None
            target = _unwrap(root)
            if isinstance(target, _Ioctl):
                t, nr, request = target.t.value(), target.nr.value(), root.value()
                assert isinstance(t, int) and isinstance(nr, int) and isinstance(request, int)
                res.ioctls.append(
                    ir.Ioctl(name, target.direction, t, nr, target.arg, target.size, request, loc)
                )
                return None
            if root.ctype is not None and root.ctype.is_pointer:
                raise _Fail("pointer-valued cast")
            v = root.value()
            res.constants.append(ir.Constant(name, _py_literal(v, root.hex), v, loc))
        except _Fail as f:
            return f.reason
        return None


# ---------------------------------------------------------------- entry point


def translate_macros(
    macros: Sequence[MacroDef], ctx: MacroContext, opts: MacroOptions, emit: Callable[[str], bool]
) -> MacroResult:
    """Translate the macros of one translation unit.

    ``macros`` is every definition visible in the unit, in source order (system headers too: they
    are needed to expand references); ``emit(name)`` says which belong to the target. Each emitted
    definition lands in exactly one of the result's lists, in input order:

    * ``constants``: object-like macros with an int, float, str value (Python literal in ``expr``,
      hex where the expression was written in hex), and ``(hi, lo)`` bit ranges;
    * ``ioctls``: macros that expand to an ``_IO``/``_IOR``/``_IOW``/``_IOWR`` request;
    * ``functions``: function-like macros with an expression body (see the module docstring for
      the ``bindgen_rt`` helpers their bodies call); references to emitted constants and
      functions stay names, other macros and enum constants are inlined;
    * ``skipped``: everything else, with the reason.

    When a name is defined more than once, the last definition is the one used (as at the end of
    the unit) and earlier emitted ones are listed as skipped. ``emit`` is called once per macro
    name, with macro names only.
    """
    # The run allocates millions of small objects and almost no garbage cycles; letting the cyclic
    # collector traverse them over and over cost a third of the time on NVIDIA's headers.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _Translator(macros, ctx, opts, emit).run(macros)
    finally:
        if paused:
            gc.enable()


def _fast_guard(params: list[str], unsigned_too: bool) -> str:
    """When a function macro's int fast path applies: every argument a plain ``int`` within
    ``int``, or, for bodies exact on unsigned values too, every argument within ``unsigned int``
    (mixing negative and >= 2**31 arguments would change C's common type, so it takes the slow
    path)."""
    if not unsigned_too:
        return " and ".join(f"{q}.__class__ is int and -0x80000000 <= {q} <= 0x7fffffff"
                            for q in params)
    if len(params) == 1:
        q = params[0]
        return f"{q}.__class__ is int and -0x80000000 <= {q} <= 0xffffffff"
    is_int = " and ".join(f"{q}.__class__ is int" for q in params)
    signed = " and ".join(f"-0x80000000 <= {q} <= 0x7fffffff" for q in params)
    unsigned = " and ".join(f"0 <= {q} <= 0xffffffff" for q in params)
    return f"{is_int} and (({signed}) or ({unsigned}))"


def _exact_unsigned(n: _Node) -> bool:
    """Whether the int-typed Python code of ``n`` also gives C's value when every parameter is
    any value of [0, 2**32) (C types those ``unsigned int`` or ``long``): true for trees of
    parameters, non-negative constants, ``&``, ``|``, ``^`` and ``>>`` by a constant below 32,
    whose values stay non-negative and never wrap, whatever the operands' C types. Register
    field getters such as ``CP_PACKET3_GET_OPCODE(h)`` are of this kind, and their headers are
    usually above INT_MAX. One pass over the tree the fast path was parsed into."""
    if isinstance(n, _Param):
        return True
    if isinstance(n, _Binary):
        if n.op in ("&", "|", "^"):
            return _exact_unsigned(n.a) and _exact_unsigned(n.b)
        if n.op == ">>":
            return _exact_unsigned(n.a) and _small_shift(n.b)
        return False
    if isinstance(n, _MacroRef):
        n = n.target
    v = _closed_int(n)
    return v is not None and 0 <= v < 1 << 63


def _small_shift(n: _Node) -> bool:
    v = _closed_int(n)
    return v is not None and 0 <= v < 32


def _closed_int(n: _Node) -> int | None:
    """The value of a node without parameters, where it is an int."""
    if not n.closed:
        return None
    try:
        v = n.value()
    except _Fail:
        return None
    return v if type(v) is int else None


def _return_code(root: _Node) -> str:
    """A function-like macro's return expression. Where its C type is not the one a literal of its
    value has (``(x) * 2u``, ``(long)(x)``), the result remembers it (``bindgen_rt._c_ret``), so
    that a macro calling it converts as C would (comedi.h's CR_PACK_FLAGS around CR_PACK)."""
    typed = getattr(root, "typed_code", None)
    dynamic = typed() if typed is not None and root.ctype is None else None
    if dynamic is not None:
        return f"_c_ret({dynamic})"
    ct = root.ctype
    if ct is None or ct.is_float or ct.is_pointer or root.closed or ct.size < 4 or ct == _INT:
        return root.code()
    return f"_c_ret(({root.code()}, {ct.size * 8}, {ct.signed}))"
