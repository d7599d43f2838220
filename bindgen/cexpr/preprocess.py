"""The preprocessor layer: macro definitions as the lookup table holds them and macro expansion
with hide sets, ``#`` and ``##`` (C11 6.10.3).
"""

from __future__ import annotations

import re
from typing import Sequence

from .model import _Fail
from .ctype import _INT, _UINT, _ULONG
from .tokens import (
    _TAGS,
    _fully_parenthesized,
    _BINARY_PREC,
    _CHAR,
    _COMMA_TOK,
    _ID,
    _IOCTL_DIRS,
    _IOC_DIR_BITS,
    _MARK,
    _MAX_EXPANSION,
    _MAX_NESTING,
    _NODE,
    _NUM,
    _PLACEMARKER,
    _PUNCT,
    _P_COMMA,
    _P_COND,
    _P_PRIMARY,
    _P_UNARY,
    _STATEMENT_ANY,
    _STR,
    _Tok,
    _is_punct,
    _kind_of,
    _spell,
    _with_hide,
    tokenize,
)
from .nodes import _Binary, _Folded, _Ioctl, _Lit, _MacroRef, _NameRef, _Node, _Param
from .parser import _Parser

TYPE_CHECKING = False
if TYPE_CHECKING:  # the translator imports this module
    from .model import MacroContext
    from .translate import _ObjMemo


# gcc's predefined macros that headers test; libclang does not list builtins with the others.
# Header definitions and the spec's ``predefined`` take precedence.
_GCC_BUILTINS = {
    "__CHAR_BIT__": "8",
    "__SIZEOF_SHORT__": "2",
    "__SIZEOF_INT__": "4",
    "__SIZEOF_LONG__": "8",
    "__SIZEOF_LONG_LONG__": "8",
    "__SIZEOF_POINTER__": "8",
    "__SIZEOF_SIZE_T__": "8",
    "__SIZEOF_FLOAT__": "4",
    "__SIZEOF_DOUBLE__": "8",
    "__SCHAR_MAX__": "0x7f",
    "__SHRT_MAX__": "0x7fff",
    "__INT_MAX__": "0x7fffffff",
    "__LONG_MAX__": "0x7fffffffffffffffL",
    "__LONG_LONG_MAX__": "0x7fffffffffffffffLL",
    "__LP64__": "1",
    "_LP64": "1",
    "__x86_64__": "1",
    "__linux__": "1",
    "__ORDER_LITTLE_ENDIAN__": "1234",
    "__ORDER_BIG_ENDIAN__": "4321",
    "__BYTE_ORDER__": "__ORDER_LITTLE_ENDIAN__",
}


_NO_PARAMS: dict[str, int] = {}


class _Macro:
    """A definition in the lookup table (from the headers, the spec's predefined set, builtins)."""

    __slots__ = (
        "name",
        "params",
        "variadic",
        "raw",
        "index",
        "has_paste",
        "statement",
        "_toks",
        "_interned",
    )

    def __init__(
        self,
        name: str,
        params: tuple[str, ...] | None,
        raw: Sequence[str],
        interned: dict[str, _Tok],
    ) -> None:
        variadic = False
        index = _NO_PARAMS
        if params:
            variadic = params[-1].endswith("...")
            if variadic:
                params = params[:-1] + ((params[-1][:-3].strip() or "__VA_ARGS__"),)
            index = {p: i for i, p in enumerate(params)}
        raw = tuple(raw)
        for s in raw:
            # libclang reports comments inside a definition as tokens, and a token that starts a
            # continued line keeps the backslash-newline in its spelling ('\\\n{').
            if s[:2] in ("/*", "//") or "\\\n" in s:
                cleaned = (
                    x.replace("\\\r\n", "").replace("\\\n", "")
                    for x in raw
                    if x[:2] not in ("/*", "//")
                )
                raw = tuple(x for x in cleaned if x)
                break
        self.name, self.params, self.variadic, self.raw, self.index = (
            name,
            params,
            variadic,
            raw,
            index,
        )
        self.has_paste = "##" in raw
        self.statement = not _STATEMENT_ANY.isdisjoint(raw)
        self._toks: tuple[_Tok, ...] | None = None
        self._interned = interned

    @property
    def toks(self) -> tuple[_Tok, ...]:
        if self._toks is None:  # converted on first use: most system-header macros never are
            interned, toks = self._interned, []
            for s in self.raw:  # tokens are never mutated, so equal spellings share one
                t = interned.get(s)
                if t is None:
                    t = interned[s] = _Tok(_kind_of(s), s)
                toks.append(t)
            self._toks = tuple(toks)
        return self._toks


def _parse_predefined_key(key: str) -> tuple[str, tuple[str, ...] | None]:
    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*(?:\(([^)]*)\))?\s*", key)
    if m is None:
        raise ValueError(f"predefined macro name {key!r}: expected NAME or NAME(a, b)")
    if m.group(2) is None:
        return m.group(1), None
    params = tuple(p.strip() for p in m.group(2).split(",") if p.strip())
    return m.group(1), params


def _context_ok(prec: int, out: list[_Tok], stack: list[_Tok]) -> bool:
    """Whether an expression of binding strength ``prec`` groups the same as its tokens would here.

    ``out[-1]`` is the token before the reference (already expanded), ``stack[-1]`` the raw one
    after it. Only punctuators are trusted: anything else might expand to an operator.
    """
    if out:
        prev = out[-1]
        if prev.kind != _PUNCT:
            return False
        p = prev.text
        if p in ("(", "?"):
            pass
        elif p == ",":
            if prec <= _P_COMMA:
                return False
        elif p == ":":
            if prec < _P_COND:
                return False
        elif p in ("~", "!"):
            if prec < _P_UNARY:
                return False
        elif p in _BINARY_PREC:
            before = out[-2] if len(out) > 1 else None
            # After ")" the operator may be unary (following a cast): assume the strictest.
            binary = (
                before is not None
                and before.kind in (_NUM, _CHAR, _STR, _NODE, _ID)
                and before.text != "sizeof"
            )
            if binary:
                if prec <= _BINARY_PREC[p]:  # equal strength regroups: a - (b - c)
                    return False
            elif p in ("+", "-"):
                if prec < _P_UNARY:
                    return False
            else:
                return False
        else:
            return False
    if stack:
        nxt = stack[-1]
        if nxt.kind != _PUNCT:
            return False
        p = nxt.text
        if p in (")", ","):
            pass
        elif p == ":":
            if prec < _P_COND:
                return False
        elif p == "?":
            if prec <= _P_COND:
                return False
        elif p in _BINARY_PREC:
            if prec < _BINARY_PREC[p]:  # all binary operators associate to the left
                return False
        else:
            return False
    return True


def _check_work(work: list[int], name: str, pushed: int = 0) -> None:
    if pushed > _MAX_EXPANSION or work[0] > _MAX_EXPANSION:
        raise _Fail(
            f"macro expansion scans more than {_MAX_EXPANSION:,} tokens (stopped in "
            f"{name}: macros that pass their own calls as arguments grow exponentially)"
        )


def _spelled(toks: Sequence[_Tok]) -> list[_Tok]:
    """``toks`` with each folded call (:class:`_Folded`) replaced by the tokens it stands for:
    what ``#`` and ``##`` see, as in a textual expansion."""
    if not any(t.kind == _NODE and isinstance(t.node, _Folded) for t in toks):
        return list(toks)
    out: list[_Tok] = []
    stack = list(reversed(toks))
    while stack:
        t = stack.pop()
        if t.kind == _NODE and isinstance(t.node, _Folded):
            stack.extend(reversed(t.node.toks))
        else:
            out.append(t)
    return out


def _paste(lhs: _Tok, rhs: _Tok) -> _Tok:
    for t in (lhs, rhs):
        if t.kind == _NODE:
            if isinstance(t.node, _Param):
                raise _Fail("uses ## on a parameter")
            raise _Fail("uses ## on an expanded macro argument")
    text = lhs.text + rhs.text
    try:
        ok = len(tokenize(text)) == 1
    except ValueError:
        ok = False
    if not ok:
        raise _Fail(f"'##' does not form a token ({text})")
    return _Tok(_kind_of(text), text, lhs.hide | rhs.hide)


def _stringize(arg: list[_Tok]) -> _Tok:
    """``#x``. Spacing follows the tokens (libclang gives no whitespace): "a+b", "unsigned int"."""
    parts: list[str] = []
    prev: _Tok | None = None
    for t in _spelled(arg):
        if t.kind == _NODE:
            if isinstance(t.node, _Param):
                raise _Fail("uses # on a parameter")
            raise _Fail("uses # on an expanded macro argument")
        s = t.text
        if t.kind in (_STR, _CHAR):
            s = s.replace("\\", "\\\\").replace('"', '\\"')
        if prev is not None and prev.kind in (_ID, _NUM) and t.kind in (_ID, _NUM):
            parts.append(" ")
        parts.append(s)
        prev = t
    return _Tok(_STR, '"' + "".join(parts) + '"')


class _Preprocessor:
    """Macro expansion (C11 6.10.3): the part of the translator that rewrites tokens.

    A mixin of :class:`~.translate._Translator`, which owns the tables and memos it reads.
    """

    if TYPE_CHECKING:  # what it uses of the translator
        ctx: MacroContext
        table: dict[str, _Macro]
        in_progress: set[str]
        params_in_scope: frozenset[str]

        def object_memo(self, name: str) -> _ObjMemo: ...
        def is_output_constant(self, name: str) -> bool: ...
        def parse_full(self, toks: list[_Tok]) -> _Node: ...
        def _call_token(self, name: str, args: list[list[_Tok]]) -> _Tok | None: ...

    # The work budget of the evaluation under way: (the translator's memo depth it belongs to,
    # [tokens scanned so far, argument expansions nested in each other], the calls expanded so
    # far (see ``_expand_call``)); None outside any expansion. Each memo gets its own, so a macro
    # first evaluated inside another one's expansion has the same outcome whoever reached it
    # first.
    _budget: tuple[int, list[int], dict] | None = None

    def expand(
        self, toks: list[_Tok], isolated: bool, mode2: bool, within: str = ""
    ) -> list[_Tok]:
        """Macro-expand ``toks`` completely (C11 6.10.3.4 rescanning, with hide sets).

        ``isolated``: the tokens are a macro argument, whose surroundings are not known yet.
        ``mode2``: translating a function body (emitted constants and functions stay names).

        The work is bounded: an argument is expanded before substitution and again when the
        result is rescanned, so a macro that passes calls of another as its arguments
        (``F2(x) = F1(F1(x))``) costs four times the one before it. Scanning more than
        ``_MAX_EXPANSION`` tokens for one definition, or arguments nested more than
        ``_MAX_NESTING`` deep, fails naming the macro being expanded (``within``: the macro whose
        argument or expansion ``toks`` are).
        """
        saved = self._budget
        depth = getattr(self, "depth", 0)
        budget = saved if saved is not None and saved[0] == depth else (depth, [0, 0], {})
        state = budget[1]
        if state[1] >= _MAX_NESTING:
            where = f" (in {within})" if within else ""
            raise _Fail(f"macro arguments nested more than {_MAX_NESTING} deep{where}")
        self._budget = budget
        state[1] += 1
        try:
            return self._expand(toks, isolated, mode2, state)
        finally:
            state[1] -= 1
            self._budget = saved

    def _expand(
        self, toks: list[_Tok], isolated: bool, mode2: bool, work: list[int]
    ) -> list[_Tok]:
        work[0] += len(toks)
        out: list[_Tok] = []
        stack = toks[::-1]
        table = self.table
        pushed = 0
        while stack:
            t = stack.pop()
            if t.kind != _ID or t.text in t.hide:
                out.append(t)
                continue
            name = t.text
            if name in _IOCTL_DIRS and stack and _is_punct(stack[-1], "("):
                out.append(self._ioctl_token(name, stack, mode2))
                continue
            m = table.get(name)
            if m is None:
                out.append(t)
                continue
            if m.params is None:
                if name in self.in_progress:
                    out.append(t)
                    continue
                sub = self._object_token(name, out, stack, isolated, mode2)
                if sub is not None:
                    out.append(sub)
                    continue
                body = self.substitute(m, [], mode2) if m.has_paste else m.toks
                repl = _with_hide(body, t.hide | {name})
            else:
                if not stack or not _is_punct(stack[-1], "("):
                    out.append(t)  # a function-like name without arguments is not expanded
                    continue
                args, rparen = self._collect_args(name, len(m.params), m.variadic, stack)
                hide = (t.hide & rparen.hide) | {name}
                if mode2:
                    call = self._call_token(name, args)
                    if call is not None:
                        out.append(call)
                        continue
                elif work[1] < _MAX_NESTING - 1 and not (
                    out and out[-1].kind == _ID and out[-1].text in _TAGS
                ):
                    # (after ``struct`` a name renaming a tag expands to the tag: see
                    # ``_object_token``, which a call expanded on its own cannot see)
                    done = self._expand_call(m, args, hide, work)
                    if isinstance(done, _Tok):
                        out.append(done)
                        continue
                    stack.extend(reversed(done))
                    continue
                repl = _with_hide(self.substitute(m, args, mode2), hide)
            pushed += len(repl)
            work[0] += len(repl)
            _check_work(work, name, pushed)
            stack.extend(reversed(repl))
        return out

    def _expand_call(
        self, m: _Macro, args: list[list[_Tok]], hide: frozenset[str], work: list[int]
    ) -> _Tok | list[_Tok]:
        """A call of the function-like macro ``m`` (evaluating a value, not translating a
        function body), expanded once per distinct call: one token standing for the parsed
        expansion where it is a whole expression on its own, else the expansion's tokens, to be
        rescanned with what follows them.

        A call's expansion in isolation, then rescanned with what follows, is what C's rescanning
        of the replacement with the rest of the text gives: only a function-like name that its own
        expansion leaves last can take tokens from after the call, and it still does on the
        rescan. An expansion that is one token other than a name, or a parenthesized expression,
        takes nothing from the rest, so it may stand as one token. The same call (same macro,
        argument tokens and hide sets) then expands once however often it appears: a macro like
        ``G(x) = (F(x) + F(x))``, nested forty deep, costs forty expansions, not 2**40 copies of
        the text. Calls whose arguments differ each expand on their own, and the work budget
        still bounds them (``F(x) = E(E(x))`` grows exponentially however it is expanded).
        """
        budget = self._budget
        assert budget is not None  # set by ``expand``, which the caller runs under
        calls = budget[2]
        key = (m.name, hide, tuple(tuple((t.kind, t.text, t.hide, t.node) for t in a)
                                   for a in args))
        work[0] += 1 + sum(map(len, args))  # checked with what the expansion adds
        done = calls.get(key)
        if done is not None:
            return done
        expanded = self.expand(
            _with_hide(self.substitute(m, args, False), hide), True, False, m.name
        )
        work[0] += len(expanded)
        _check_work(work, m.name)
        done = expanded
        if len(expanded) == 1:
            if expanded[0].kind != _ID:
                done = expanded[0]
        elif _fully_parenthesized(expanded):
            try:
                node = self.parse_full(expanded)
            except _Fail:
                node = None
            if node is not None and not node.is_str:
                try:
                    node.value()  # now, while its operands' values are cached: shallow recursion
                except _Fail:
                    pass  # an evaluation error only matters where the value is used
                done = _Tok(_NODE, m.name, node=_Folded(m.name, node, expanded))
        calls[key] = done
        return done

    def _object_token(
        self, name: str, out: list[_Tok], stack: list[_Tok], isolated: bool, mode2: bool
    ) -> _Tok | None:
        """The evaluated node standing for ``name``, or None to expand it textually."""
        if out and out[-1].kind == _ID and out[-1].text in _TAGS:
            return None  # `struct NAME`: a macro renaming a tag expands to the tag (asound.h)
        memo = self.object_memo(name)
        if memo.root is None:
            if memo.fail is not None and not memo.fail.contextual:
                raise _Fail(memo.fail.reason)  # e.g. undefined: no context can fix that
            return None
        prec = memo.prec
        if prec < _P_PRIMARY and (isolated or not _context_ok(prec, out, stack)):
            return None
        if mode2 and name not in self.params_in_scope and self.is_output_constant(name):
            node: _Node = _NameRef(name, memo.root)
        else:
            node = _MacroRef(name, memo.root)
        return _Tok(_NODE, name, node=node, prec=prec)

    @staticmethod
    def _collect_args(
        name: str, nparams: int, variadic: bool, stack: list[_Tok]
    ) -> tuple[list[list[_Tok]], _Tok]:
        stack.pop()  # "("
        args: list[list[_Tok]] = [[]]
        depth = 0
        while stack:
            t = stack.pop()
            if t.kind == _PUNCT:
                if t.text == "(":
                    depth += 1
                elif t.text == ")":
                    if depth == 0:
                        break
                    depth -= 1
                elif t.text == "," and depth == 0:
                    args.append([])
                    continue
            args[-1].append(t)
        else:
            raise _Fail(f"unterminated call of {name}", True)
        rparen = t
        if variadic:
            if len(args) == nparams - 1:
                args.append([])
            elif len(args) > nparams:
                rest: list[_Tok] = []
                for a in args[nparams - 1 :]:
                    if rest:
                        rest.append(_COMMA_TOK)
                    rest.extend(a)
                args = args[: nparams - 1] + [rest]
        elif nparams == 0 and args == [[]]:
            args = []
        if len(args) != nparams:
            raise _Fail(f"{name} expects {nparams} arguments, got {len(args)}")
        return args, rparen

    def substitute(self, m: _Macro, args: list[list[_Tok]], mode2: bool) -> list[_Tok]:
        """Replace parameters (expanded unless next to # or ##), stringize and paste."""
        body, index, func = m.toks, m.index, m.params is not None
        out: list[_Tok] = []
        expanded: dict[int, list[_Tok]] = {}
        i, n = 0, len(body)
        while i < n:
            t = body[i]
            if t.kind == _PUNCT and t.text == "#" and func:
                nxt = body[i + 1] if i + 1 < n else None
                if nxt is None or nxt.kind != _ID or nxt.text not in index:
                    raise _Fail("'#' not followed by a parameter")
                out.append(_stringize(args[index[nxt.text]]))
                i += 2
                continue
            if t.kind == _PUNCT and t.text == "##":
                if not out or i + 1 >= n:
                    raise _Fail("'##' at the edge of a macro body")
                nxt = body[i + 1]
                rhs = (
                    _spelled(args[index[nxt.text]])
                    if nxt.kind == _ID and nxt.text in index
                    else [nxt]
                )
                lhs = out.pop()
                if lhs.kind == _NODE and isinstance(lhs.node, _Folded):
                    out.extend(_spelled([lhs]))
                    lhs = out.pop()
                if lhs.kind == _MARK:
                    out.extend(rhs or [lhs])
                elif not rhs:
                    out.append(lhs)
                else:
                    out.append(_paste(lhs, rhs[0]))
                    out.extend(rhs[1:])
                i += 2
                continue
            if t.kind == _ID and t.text in index:
                k = index[t.text]
                if i + 1 < n and _is_punct(body[i + 1], "##"):
                    out.extend(_spelled(args[k]) or [_PLACEMARKER])
                else:
                    e = expanded.get(k)
                    if e is None:
                        e = expanded[k] = self.expand(list(args[k]), True, mode2, m.name)
                    out.extend(e)
                i += 1
                continue
            out.append(t)
            i += 1
        return [t for t in out if t.kind != _MARK]

    def _ioctl_token(self, name: str, stack: list[_Tok], mode2: bool) -> _Tok:
        direction = _IOCTL_DIRS[name]
        args, _ = self._collect_args(name, 3 if direction else 2, False, stack)
        t_node = self.parse_full(self.expand(list(args[0]), True, mode2))
        nr_node = self.parse_full(self.expand(list(args[1]), True, mode2))
        size, arg = 0, None
        if direction:
            ttoks = self.expand(list(args[2]), True, mode2)
            if any(t.kind == _NODE and isinstance(t.node, _Param) for t in ttoks):
                raise _Fail("ioctl argument type is a parameter")
            p = _Parser(ttoks, self)  # type: ignore[arg-type]  # self is the _Translator
            try:
                tn = p.type_name()
                if not p.at_end():
                    raise p.unexpected()
            except _Fail:
                raise _Fail(f"unknown type {_spell(ttoks)}") from None
            size = tn.size()  # _IOC_TYPECHECK(t) is sizeof(t)
            if not tn.pointers and not tn.dims:
                arg = self.ctx.record_names.get(tn.base)
        # _IOC(dir,type,nr,size): dir << 30 | size << 16 | type << 8 | nr; the size is a size_t.
        head = _Lit(
            (_IOC_DIR_BITS[direction] << 30) | (size << 16),
            _ULONG if direction else _UINT,
            hex_=True,
        )
        expr = _Binary("|", _Binary("|", head, _Binary("<<", t_node, _Lit(8, _INT))), nr_node)
        return _Tok(_NODE, name, node=_Ioctl(direction, t_node, nr_node, size, arg, expr))
