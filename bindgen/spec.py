"""Spec files (YAML) → frozen dataclasses.

Every error names ``file:line``, the key and what was expected; unknown keys are errors. A spec may
declare a ``matrix`` of parameter sets: each set renders the sources and targets once, with
``${name}`` replaced in every string (so ``nv_${ver}`` gives ``nv_570`` and ``nv_580`` from one
file).
"""

from __future__ import annotations

import builtins
import keyword
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from .errors import SpecError
from .pins import load_lock

if TYPE_CHECKING:
    from .pins import SourcePin

SOURCE_KINDS = ("system", "debian", "pypi", "archive", "git")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A git revision that can only be a revision: no option (leading '-'), no range or path syntax.
_GIT_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/-]*")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# A group of a quantified atom, itself quantified: `(a+)+`, `(x*y)*`; backtracking on such a
# pattern is exponential in the name's length, so it is refused rather than hanging a run.
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[*+}](?:[^()\\]|\\.)*\)[*+{]")


@dataclass(frozen=True)
class Source:
    name: str
    kind: str
    path: str = ""  # system
    package: str = ""  # system (who provides it), debian, pypi
    version: str = ""  # debian, pypi
    arch: str = "amd64"  # debian
    url: str = ""  # archive, git
    ref: str = ""  # git
    sha256: str = ""  # archive (required), debian (optional: the .deb), pypi (optional: wheel)
    tarball: str = ""  # debian/archive: an inner tarball to unpack selectively
    members: tuple[str, ...] = ()  # globs of the files taken (after `strip`); empty: all
    strip: int = 0  # leading path components to drop when unpacking `tarball`
    line: int = 0
    pin: "SourcePin | None" = None  # from the spec's lock file (see bindgen.pins)

    def identity(self) -> str:
        """Everything that decides the files this source yields (not its name or pins)."""
        import json

        return json.dumps([self.kind, self.package or self.url or self.path, self.version,
                           self.arch, self.ref, self.tarball, self.strip, list(self.members)])


@dataclass(frozen=True)
class SourcePath:
    source: str
    path: str
    line: int = field(default=0, compare=False)  # in the spec, for messages

    def __str__(self) -> str:
        return f"{self.source}:{self.path}"


@dataclass(frozen=True)
class MacroRules:
    enabled: bool = True
    bit_ranges: bool = False
    range_wrappers: tuple[str, ...] = ()
    predefined: tuple[tuple[str, str], ...] = ()
    skip: tuple[tuple[str, str], ...] = ()  # (regex, reason)
    records: tuple["MacroRecordRule", ...] = ()
    tables: tuple[MacroTableRule, ...] = ()


@dataclass(frozen=True)
class MacroTableRule:
    """An X-macro table: every ``invocation(a, b, ...)`` line in ``files`` becomes one row of the
    tuple constant ``name`` (numbers and strings evaluated, identifiers kept as their names)."""

    invocation: str
    name: str
    files: tuple[str, ...]  # globs over SOURCE:PATH
    why: str


@dataclass(frozen=True)
class MacroRecordRule:
    """Builds packet records from field macros (``PKT_DW_field_offset/_mask/_shift``).

    ``anchor`` finds the record names (group ``rec``); ``fields`` is matched against what follows
    ``<rec>_`` in every macro name and has groups ``dword``, ``field`` and ``kind``
    (offset = dword index, mask = unshifted mask, shift = bit position)."""

    anchor: str
    fields: str
    why: str


@dataclass(frozen=True)
class Patch:
    op: str  # rename | alias | type | drop | extra | replace
    why: str
    args: tuple[tuple[str, Any], ...]
    line: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.args).get(key, default)


@dataclass(frozen=True)
class LibrarySpec:
    name: str
    candidates: tuple[str, ...]
    env: str


@dataclass(frozen=True)
class Target:
    name: str
    group: str
    spec_file: str  # relative to the specs folder
    output: str  # relative to generated/
    headers: tuple[SourcePath, ...]
    include_dirs: tuple[SourcePath, ...]
    preinclude: tuple[SourcePath, ...]  # clang -include, before the headers
    clang_args: tuple[str, ...]
    language: str  # c | c++
    keep_files: tuple[str, ...]  # globs over "source:path"; default: the target's headers
    keep_names: tuple[str, ...]  # regexes; empty = everything in the kept files
    exclude_names: tuple[str, ...]
    macros: MacroRules
    libraries: tuple[LibrarySpec, ...]
    patches: tuple[Patch, ...]
    lazy: bool | None  # None: lazy when the module is big (``bindgen.generate.AUTO_LAZY_BYTES``)
    sources: tuple[Source, ...]  # every source the target reads (its own closure)
    line: int = 0
    description: str = ""
    spec_shown: str = ""  # the spec file as messages show it (relative to the project root)
    wrap_static_fns: bool = False  # static inline functions through compiled wrappers
    enums: str = "int"  # int | IntEnum: what a C enum is in Python (bindgen.passes.enum_classes)
    flag_enums: tuple[str, ...] = ()  # regexes over enum names: IntFlag instead of IntEnum


@dataclass(frozen=True)
class SpecFile:
    path: str
    group: str
    targets: tuple[Target, ...]


# ---------------------------------------------------------------- YAML with line numbers


class _Node:
    """A YAML value with the line it came from."""

    def __init__(self, value: Any, line: int) -> None:
        self.value, self.line = value, line


def _compose(node: yaml.Node) -> _Node:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, _Node] = {}
        keys: dict[str, int] = {}
        for k, v in node.value:
            key = k.value
            if key in keys:
                raise _DupKey(key, k.start_mark.line + 1)
            keys[key] = k.start_mark.line + 1
            out[key] = _compose(v)
            out[key].key_line = k.start_mark.line + 1  # type: ignore[attr-defined]
        return _Node(out, line)
    if isinstance(node, yaml.SequenceNode):
        return _Node([_compose(v) for v in node.value], line)
    return _Node(
        yaml.safe_load(yaml.serialize(node)) if node.tag != "tag:yaml.org,2002:str" else node.value,
        line,
    )


# Bounds on what a spec's YAML may make the loader build. A few hundred bytes of nested aliases
# ("billion laughs") stand for billions of values, and deep nesting exhausts Python's stack; the
# largest real spec holds a few hundred values, ten levels deep.
_MAX_YAML_VALUES = 200_000
_MAX_YAML_DEPTH = 64


class _TooBig(Exception):
    def __init__(self, line: int, what: str) -> None:
        self.line, self.what = line, what


class _BoundedLoader(yaml.SafeLoader):
    """Composes a YAML document, counting the values it stands for with every alias expanded
    (each anchored node measured once) and its nesting, and stopping at the bounds above."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._depth = 0
        self._values = 0
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) → (values, depth) expanded

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        line = self.peek_event().start_mark.line + 1
        if self.check_event(yaml.AliasEvent):
            anchor = self.peek_event().anchor
            if anchor in self.anchors:
                values, depth = self._measure(self.anchors[anchor])
                self._count(values, line)
                if self._depth + depth > _MAX_YAML_DEPTH:
                    raise _TooBig(line, f"alias *{anchor} nests values more than "
                                        f"{_MAX_YAML_DEPTH} levels deep")
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        self._count(1, line)
        self._depth += 1
        if self._depth > _MAX_YAML_DEPTH:
            raise _TooBig(line, f"values nested more than {_MAX_YAML_DEPTH} levels deep")
        try:
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        finally:
            self._depth -= 1

    def _count(self, values: int, line: int) -> None:
        self._values += values
        if self._values > _MAX_YAML_VALUES:
            raise _TooBig(line, f"the spec stands for more than {_MAX_YAML_VALUES:,} values with "
                                "its aliases expanded; write them out, or use fewer aliases")

    def _measure(self, node: yaml.Node) -> tuple[int, int]:
        """(values, depth) of ``node`` with every alias in it expanded. Its own nesting is
        bounded already, and each anchored node inside was measured when its alias was read."""
        hit = self._measured.get(id(node))
        if hit is not None:
            return hit
        values, depth = 1, 1
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            kids = (
                node.value
                if isinstance(node, yaml.SequenceNode)
                else [n for pair in node.value for n in pair]
            )
            for kid in kids:
                v, d = self._measure(kid)
                values += v
                depth = max(depth, d + 1)
                if values > _MAX_YAML_VALUES:
                    break
        self._measured[id(node)] = (values, depth)
        return values, depth


def _compose_bounded(text: str) -> yaml.Node | None:
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    finally:
        loader.dispose()


class _DupKey(Exception):
    def __init__(self, key: str, line: int) -> None:
        self.key, self.line = key, line


class _Reader:
    """Typed access to a mapping node; records which keys were read so leftovers are errors."""

    def __init__(self, file: str, node: _Node, where: str, subst: Callable[[str], str]) -> None:
        self.file, self.where, self.subst = file, where, subst
        if not isinstance(node.value, dict):
            raise SpecError(file, node.line, where, f"expected a mapping, got {_kind(node.value)}")
        self.node = node
        self.used: set[str] = set()

    def err(self, key: str, msg: str, line: int | None = None) -> SpecError:
        n = self.node.value.get(key)
        return SpecError(
            self.file,
            line or (n.line if n else self.node.line),
            f"{self.where}.{key}" if self.where else key,
            msg,
        )

    def raw(self, key: str) -> _Node | None:
        self.used.add(key)
        return self.node.value.get(key)

    def sub_text(self, key: str, value: str, line: int | None = None) -> str:
        try:
            return self.subst(value)
        except _Undefined as e:
            raise self.err(key, f"${{{e.name}}} used but not defined in the matrix", line) from None

    def str(self, key: str, default: str | None = None, choices: tuple[str, ...] = ()) -> str:
        n = self.raw(key)
        if n is None:
            if default is None:
                raise self.err(key, "required key is missing", self.node.line)
            return default
        if not isinstance(n.value, (str, int, float)) or isinstance(n.value, bool):
            raise self.err(key, f"expected a string, got {_kind(n.value)}")
        v = self.sub_text(key, str(n.value))
        if choices and v not in choices:
            raise self.err(key, f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    def line_text(self, key: builtins.str, default: builtins.str | None = None) -> builtins.str:
        """A one-line text (descriptions, reasons): it ends up in comments of generated code, so
        line breaks and other control characters are refused."""
        v = self.str(key, default)
        bad = next((c for c in v if ord(c) < 32 or ord(c) == 127 or c in "\u2028\u2029\x85"), None)
        if bad is not None:
            raise self.err(key, f"must be one line of text without control characters "
                                f"(found {bad!r})")
        return v

    def ident(self, key: builtins.str) -> builtins.str:
        """A Python identifier that generated code will define."""
        v = self.str(key)
        if not _IDENT.fullmatch(v) or keyword.iskeyword(v):
            raise self.err(key, f"expected a Python identifier, got {v!r}")
        return v

    def bool(self, key: builtins.str, default: builtins.bool) -> builtins.bool:
        n = self.raw(key)
        if n is None:
            return default
        if not isinstance(n.value, bool):
            raise self.err(key, f"expected true or false, got {_kind(n.value)}")
        return n.value

    def bool_or_auto(self, key: builtins.str) -> builtins.bool | None:
        """true, false, or None for ``auto`` or no value (the generator decides)."""
        n = self.raw(key)
        if n is None or n.value == "auto":
            return None
        if not isinstance(n.value, bool):
            raise self.err(key, f"expected true, false or auto, got {_kind(n.value)}")
        return n.value

    def int(self, key: builtins.str, default: int) -> int:
        n = self.raw(key)
        if n is None:
            return default
        if not isinstance(n.value, int) or isinstance(n.value, bool):
            raise self.err(key, f"expected an integer, got {_kind(n.value)}")
        return n.value

    def str_list(self, key: builtins.str) -> tuple[builtins.str, ...]:
        n = self.raw(key)
        if n is None:
            return ()
        if not isinstance(n.value, list):
            raise self.err(key, f"expected a list of strings, got {_kind(n.value)}")
        out = []
        for item in n.value:
            if not isinstance(item.value, (str, int, float)) or isinstance(item.value, bool):
                raise self.err(
                    key, f"expected a list of strings, found {_kind(item.value)}", item.line
                )
            out.append(self.sub_text(key, str(item.value), item.line))
        return tuple(out)

    def list(self, key: builtins.str) -> list[_Node]:
        n = self.raw(key)
        if n is None:
            return []
        if not isinstance(n.value, list):
            raise self.err(key, f"expected a list, got {_kind(n.value)}")
        return n.value

    def mapping(self, key: builtins.str) -> dict[builtins.str, _Node]:
        n = self.raw(key)
        if n is None:
            return {}
        if not isinstance(n.value, dict):
            raise self.err(key, f"expected a mapping, got {_kind(n.value)}")
        return n.value

    def sub(self, key: builtins.str, where: builtins.str | None = None) -> "_Reader | None":
        n = self.raw(key)
        if n is None:
            return None
        return _Reader(
            self.file, n, where or (f"{self.where}.{key}" if self.where else key), self.subst
        )

    def done(self, allowed: tuple[builtins.str, ...]) -> None:
        for key, n in self.node.value.items():
            if key not in allowed:
                raise SpecError(
                    self.file,
                    getattr(n, "key_line", n.line),
                    f"{self.where}.{key}" if self.where else key,
                    f"unknown key (expected one of: {', '.join(allowed)})",
                )


def _kind(v: Any) -> str:
    return {dict: "a mapping", list: "a list", bool: "a boolean", type(None): "nothing"}.get(
        type(v), f"{type(v).__name__} {v!r}"
    )


# ---------------------------------------------------------------- loading


_SOURCE_KEYS = {
    "system": ("kind", "path", "package"),
    "debian": ("kind", "package", "version", "arch", "sha256", "tarball", "members", "strip"),
    "pypi": ("kind", "package", "version", "sha256", "members"),
    "archive": ("kind", "url", "sha256", "tarball", "members", "strip"),
    "git": ("kind", "url", "ref", "members"),
}
_REQUIRED = {
    "system": ("path",),  # `package` (who provides it) is optional: a plain local folder has none
    "debian": ("package", "version"),
    "pypi": ("package", "version"),
    "archive": ("url", "sha256"),
    "git": ("url", "ref"),
}
_TARGET_KEYS = (
    "description",
    "output",
    "headers",
    "include_dirs",
    "preinclude",
    "clang_args",
    "language",
    "keep",
    "macros",
    "libraries",
    "patches",
    "lazy",
    "wrap_static_fns",
    "enums",
    "flag_enums",
)
_PATCH_OPS = {
    "rename": ("from", "to"),
    "alias": ("name", "to"),
    "type": ("record", "field", "to"),
    "drop": ("pattern",),
    "extra": ("code",),
}
# What a rename's `kind` may name: the declaration kinds of a module (bindgen.ir.DECLARATION_KINDS).
RENAME_KINDS = (
    "record", "enum", "typedef", "function", "variable", "constant", "macro function", "ioctl",
)
_REMOVED_OPS = {
    "replace": "text patches on rendered code were removed: they made spec text into code. Use "
    "rename, alias, type or drop; `extra` is the one patch that adds code, explicitly",
}


def _source(r: _Reader, name: str, line: int) -> Source:
    kind = r.str("kind", choices=SOURCE_KINDS)
    r.done(_SOURCE_KEYS[kind])
    for key in _REQUIRED[kind]:
        if key not in r.node.value:
            raise r.err(key, f"required for a {kind} source", r.node.line)
    if kind == "git":
        ref = r.str("ref")
        if not _GIT_REF.fullmatch(ref) or ".." in ref or "//" in ref or ref.endswith((".", "/")):
            raise r.err("ref", f"expected a tag, branch or commit name, got {ref!r}")
    if "sha256" in r.node.value and not _SHA256.fullmatch(r.str("sha256")):
        raise r.err("sha256", "expected 64 lowercase hex digits")
    for key in ("path", "package", "version", "arch", "url", "tarball"):
        if key in r.node.value:
            r.line_text(key)
    if kind == "system" and not Path(r.str("path")).is_absolute():
        raise r.err("path", "expected an absolute folder")
    if "tarball" in r.node.value:
        tb = r.str("tarball")
        if tb.startswith("/") or ".." in tb.split("/"):
            raise r.err("tarball", f"expected a path inside the package, got {tb!r}")
    if r.int("strip", 0) < 0:
        raise r.err("strip", "expected a number of leading folders, 0 or more")
    return Source(
        name=name,
        kind=kind,
        path=r.str("path", ""),
        package=r.str("package", ""),
        version=r.str("version", ""),
        arch=r.str("arch", "amd64"),
        url=r.str("url", ""),
        ref=r.str("ref", ""),
        sha256=r.str("sha256", ""),
        tarball=r.str("tarball", ""),
        members=r.str_list("members"),
        strip=r.int("strip", 0),
        line=line,
    )


def _source_path(r: _Reader, key: str, sources: dict[str, Source]) -> tuple[SourcePath, ...]:
    out = []
    n = r.raw(key)
    for value, item in zip(r.str_list(key), n.value if n else []):
        src, sep, path = value.partition(":")
        if not sep or not path:
            raise r.err(key, f"expected SOURCE:PATH, got {value!r}", item.line)
        if src not in sources:
            raise r.err(
                key, f"unknown source {src!r} (declared: {', '.join(sorted(sources))})", item.line
            )
        path = path.lstrip("/")
        if ".." in path.split("/"):
            raise r.err(key, f"{value!r} climbs out of source {src!r} with '..'", item.line)
        out.append(SourcePath(src, path, item.line))
    return tuple(out)


def _patches(r: _Reader) -> tuple[Patch, ...]:
    out = []
    for i, node in enumerate(r.list("patches")):
        pr = _Reader(r.file, node, f"{r.where}.patches[{i}]", r.subst)
        if not isinstance(node.value, dict):
            raise SpecError(r.file, node.line, pr.where, "expected a mapping")
        for k in node.value:
            if k in _REMOVED_OPS:
                raise SpecError(r.file, node.line, f"{pr.where}.{k}", _REMOVED_OPS[k])
        ops = [k for k in node.value if k in _PATCH_OPS]
        if len(ops) != 1:
            raise SpecError(
                r.file, node.line, pr.where, f"expected exactly one of {', '.join(_PATCH_OPS)}"
            )
        op = ops[0]
        why = pr.line_text("why")
        body = pr.raw(op)
        assert body is not None
        if op in ("drop", "extra"):
            if not isinstance(body.value, str):
                raise pr.err(op, "expected a string")
            args: tuple[tuple[str, Any], ...] = (
                (_PATCH_OPS[op][0], pr.sub_text(op, body.value, body.line)),
            )
        else:
            br = _Reader(r.file, body, f"{pr.where}.{op}", r.subst)
            # Names a patch defines become Python names: identifiers only, never code.
            idents = {"rename": ("to",), "alias": ("name", "to"), "type": ("record", "field", "to")}
            vals = [(k, br.ident(k) if k in idents[op] else br.str(k)) for k in _PATCH_OPS[op]]
            optional: tuple[str, ...] = ()
            if op == "rename":  # one kind of declaration only, where C names two things alike
                optional = ("kind",)
                if "kind" in body.value:
                    vals.append(("kind", br.str("kind", choices=RENAME_KINDS)))
            br.done(_PATCH_OPS[op] + optional)
            args = tuple(vals)
        pr.done((op, "why"))
        if op == "drop":
            try:
                re.compile(dict(args)["pattern"])
            except re.error as e:
                raise pr.err(op, f"bad regular expression: {e}")
        out.append(Patch(op, why, args, node.line))
    return tuple(out)


def _macros(r: _Reader | None) -> MacroRules:
    if r is None:
        return MacroRules()
    skip = []
    for i, node in enumerate(r.list("skip")):
        sr = _Reader(r.file, node, f"{r.where}.skip[{i}]", r.subst)
        pat, why = sr.str("pattern"), sr.line_text("why")
        sr.done(("pattern", "why"))
        try:
            re.compile(pat)
        except re.error as e:
            raise sr.err("pattern", f"bad regular expression: {e}")
        skip.append((pat, why))
    records = []
    for i, node in enumerate(r.list("records")):
        rr = _Reader(r.file, node, f"{r.where}.records[{i}]", r.subst)
        anchor, fields, why = rr.str("anchor"), rr.str("fields"), rr.line_text("why")
        rr.done(("anchor", "fields", "why"))
        for key, pat, need in (
            ("anchor", anchor, {"rec"}),
            ("fields", fields, {"dword", "field", "kind"}),
        ):
            try:
                groups = set(re.compile(pat).groupindex)
            except re.error as e:
                raise rr.err(key, f"bad regular expression: {e}")
            if not need <= groups:
                raise rr.err(key, f"needs named groups {', '.join(sorted(need))}")
        records.append(MacroRecordRule(anchor, fields, why))
    tables = []
    for i, node in enumerate(r.list("tables")):
        tr = _Reader(r.file, node, f"{r.where}.tables[{i}]", r.subst)
        inv, name, why = tr.str("invocation"), tr.str("name"), tr.line_text("why")
        files = tr.str_list("files")
        tr.done(("invocation", "name", "files", "why"))
        for key, val in (("invocation", inv), ("name", name)):
            if not re.fullmatch(r"[A-Za-z_]\w*", val):
                raise tr.err(key, f"expected a C identifier, got {val!r}")
        if not files:
            raise tr.err("files", "expected at least one SOURCE:PATH glob", node.line)
        tables.append(MacroTableRule(inv, name, files, why))
    pre = tuple(sorted((k, r.subst(str(v.value))) for k, v in r.mapping("predefined").items()))
    rules = MacroRules(
        enabled=r.bool("enabled", True),
        bit_ranges=r.bool("bit_ranges", False),
        range_wrappers=r.str_list("range_wrappers"),
        predefined=pre,
        skip=tuple(skip),
        records=tuple(records),
        tables=tuple(tables),
    )
    r.done(("enabled", "bit_ranges", "range_wrappers", "predefined", "skip", "records", "tables"))
    return rules


def _libraries(r: _Reader) -> tuple[LibrarySpec, ...]:
    out = []
    for i, node in enumerate(r.list("libraries")):
        lr = _Reader(r.file, node, f"{r.where}.libraries[{i}]", r.subst)
        name = lr.str("name")
        cands = lr.str_list("candidates")
        if not cands:
            raise lr.err("candidates", "expected at least one library file name or path")
        env = lr.str("env", "BINDGEN_LIB_" + re.sub(r"\W", "_", name).upper())
        lr.done(("name", "candidates", "env"))
        out.append(LibrarySpec(name, cands, env))
    return tuple(out)


def load_spec(
    path: Path,
    specs_root: Path | None = None,
    shown_root: str = "",
    pins: dict[str, SourcePin] | None = None,
) -> SpecFile:
    """Parses and validates one spec file (all its matrix variants). Messages show the file as
    ``shown_root/REL`` (REL: its path under ``specs_root``), so they need no absolute path."""
    rel = path.relative_to(specs_root).as_posix() if specs_root else path.name
    shown = f"{shown_root}/{rel}" if shown_root else rel
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SpecError(shown, None, "", f"cannot read spec: {e.strerror}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SpecError(shown, line, "", f"not UTF-8 text (byte 0x{data[e.start]:02x}); save "
                                         "the spec as UTF-8") from None
    try:
        node = _compose_bounded(text)
        root = _compose(node) if node is not None else None
    except _DupKey as e:
        raise SpecError(shown, e.line, e.key, "duplicate key")
    except _TooBig as e:
        raise SpecError(shown, e.line, "", e.what) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SpecError(shown, mark.line + 1 if mark else None, "", f"invalid YAML: {e}")
    if root is None:
        raise SpecError(shown, 1, "", "empty spec")

    top = _Reader(shown, root, "", lambda s: s)
    matrix_node = top.raw("matrix")
    variants: list[dict[str, str]] = [{}]
    if matrix_node is not None:
        if not isinstance(matrix_node.value, list) or not matrix_node.value:
            raise top.err("matrix", "expected a non-empty list of parameter mappings")
        variants = []
        for item in matrix_node.value:
            if not isinstance(item.value, dict):
                raise SpecError(shown, item.line, "matrix", "expected a mapping of parameters")
            variants.append({k: str(v.value) for k, v in item.value.items()})

    targets: list[Target] = []
    group = ""
    for params in variants:

        def subst(s: str, params: dict[str, str] = params) -> str:
            def one(m: re.Match[str]) -> str:
                if m.group(1) not in params:
                    raise _Undefined(m.group(1))
                return params[m.group(1)]

            return re.sub(r"\$\{(\w+)\}", one, s)

        def subst_key(key: str, node: _Node, where: str) -> str:
            try:
                return subst(key)
            except _Undefined as e:
                raise SpecError(shown, getattr(node, "key_line", node.line), where,
                                f"${{{e.name}}} used but not defined in the matrix") from None

        r = _Reader(shown, root, "", subst)
        group = r.str("group")
        if not _IDENT.fullmatch(group) or keyword.iskeyword(group) or group == "all":
            raise r.err("group", f"expected a Python identifier other than 'all' (it names the "
                                 f"output package and selects targets), got {group!r}")
        r.line_text("description", "")
        r.raw("matrix")
        sources: dict[str, Source] = {}
        for name, snode in r.mapping("sources").items():
            name = subst_key(name, snode, f"sources.{name}")
            if not _NAME.match(name):
                raise SpecError(shown, getattr(snode, "key_line", snode.line), f"sources.{name}",
                                "expected a simple name (letters, digits, _ . -)")
            sources[name] = _source(
                _Reader(shown, snode, f"sources.{name}", subst), name, snode.line
            )
        tnodes = r.mapping("targets")
        if not tnodes:
            raise r.err("targets", "a spec needs at least one target", root.line)
        defaults = r.sub("defaults")
        d_args = defaults.str_list("clang_args") if defaults else ()
        d_inc = _source_path(defaults, "include_dirs", sources) if defaults else ()
        if defaults:
            defaults.done(("clang_args", "include_dirs"))
        for tname, tnode in tnodes.items():
            tname = subst_key(tname, tnode, f"targets.{tname}")
            if not _NAME.match(tname) or tname == "all":
                raise SpecError(shown, tnode.line, f"targets.{tname}",
                                "expected a simple name other than 'all'")
            t = _Reader(shown, tnode, f"targets.{tname}", subst)
            headers = _source_path(t, "headers", sources)
            if not headers:
                raise t.err("headers", "a target needs at least one header", tnode.line)
            includes = d_inc + _source_path(t, "include_dirs", sources)
            pre = _source_path(t, "preinclude", sources)
            keep = t.sub("keep")
            keep_files = keep.str_list("files") if keep else ()
            keep_names = keep.str_list("names") if keep else ()
            exclude = keep.str_list("exclude") if keep else ()
            if keep:
                for key in ("names", "exclude"):
                    for pat in keep.str_list(key):
                        try:
                            re.compile(pat)
                        except re.error as e:
                            raise keep.err(key, f"bad regular expression {pat!r}: {e}")
                        if _NESTED_QUANTIFIER.search(pat):
                            raise keep.err(key, f"{pat!r} repeats a repeated group; matching it "
                                                "can take exponential time: write it without "
                                                "the nesting (e.g. `(a+)+` as `a+`)")
                keep.done(("files", "names", "exclude"))
            used = {p.source for p in headers + includes + pre}
            enums = t.str("enums", "int", choices=("int", "IntEnum"))
            flag_enums = t.str_list("flag_enums")
            for pat in flag_enums:
                try:
                    re.compile(pat)
                except re.error as e:
                    raise t.err("flag_enums", f"bad regular expression {pat!r}: {e}")
                if _NESTED_QUANTIFIER.search(pat):
                    raise t.err("flag_enums", f"{pat!r} repeats a repeated group; matching it "
                                              "can take exponential time")
            if flag_enums and enums != "IntEnum":
                raise t.err("flag_enums", "flag enums are enum classes: set `enums: IntEnum` "
                                          "too (with `enums: int` every enum is a plain int)")
            target = Target(
                name=tname,
                group=group,
                spec_file=rel,
                output=t.str("output", f"{group}/{tname}.py"),
                headers=headers,
                include_dirs=includes,
                preinclude=pre,
                clang_args=d_args + t.str_list("clang_args"),
                language=t.str("language", "c", choices=("c", "c++")),
                keep_files=keep_files or tuple(str(h) for h in headers),
                keep_names=keep_names,
                exclude_names=exclude,
                macros=_macros(t.sub("macros")),
                libraries=_libraries(t),
                patches=_patches(t),
                lazy=t.bool_or_auto("lazy"),
                wrap_static_fns=t.bool("wrap_static_fns", False),
                enums=enums,
                flag_enums=flag_enums,
                sources=tuple(sources[s] for s in sorted(used)),
                line=tnode.line,
                description=t.line_text("description", ""),
                spec_shown=shown,
            )
            problem = output_problem(target.output)
            if problem:
                raise t.err("output", problem, None if "output" in tnode.value else tnode.line)
            t.done(_TARGET_KEYS)
            targets.append(target)
        r.done(("group", "description", "matrix", "sources", "defaults", "targets"))
    pins = load_lock(path.parent) if pins is None else pins
    for src in [s for tg in targets for s in tg.sources]:
        pin = pins.get(src.identity())
        if pin is not None and src.sha256 and src.sha256 != pin.archive_sha256:
            raise SpecError(
                shown, src.line, f"sources.{src.name}.sha256",
                f"{src.sha256} is not the sha256 of {pin.archive} that bindgen.lock pins "
                f"({pin.archive_sha256}); correct one of them (`bindgen pin` checks the "
                "spec's against the package index)",
            )
    if pins:
        targets = [
            replace(t, sources=tuple(replace(s, pin=pins.get(s.identity())) for s in t.sources))
            for t in targets
        ]
    names = [t.name for t in targets]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SpecError(
            shown, None, "targets", f"target names repeat across the matrix: {sorted(dup)}"
        )
    return SpecFile(rel, group, tuple(targets))


def output_problem(output: str) -> str | None:
    """Why ``output`` cannot be a target's module path (None when it can): it must stay inside
    the output root and be importable, and ``__init__.py`` files belong to the packages."""
    parts = output.split("/")
    if not output.endswith(".py") or output.startswith("/") or "\\" in output:
        return f"expected a relative path ending in .py, got {output!r}"
    names = parts[:-1] + [parts[-1][: -len(".py")]]
    for n in names:
        if n in ("", ".", ".."):
            return f"{output!r} must not contain empty, '.' or '..' parts"
        if not _IDENT.fullmatch(n) or keyword.iskeyword(n):
            return f"{n!r} in {output!r} is not a Python identifier, so the module cannot be imported"
    if names[-1] == "__init__":
        return f"{output!r} would replace a package's __init__.py"
    return None


class _Undefined(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def load_all(specs_root: Path, shown_root: str = "") -> list[Target]:
    """Every target of every spec under ``specs_root``, sorted by name; names must be unique."""
    targets: dict[str, Target] = {}
    pins = load_lock(specs_root)
    for path in sorted(specs_root.glob("*.yaml")):
        for t in load_spec(path, specs_root, shown_root, pins).targets:
            if t.name in targets:
                raise SpecError(
                    t.spec_shown,
                    t.line,
                    f"targets.{t.name}",
                    f"also defined in {targets[t.name].spec_shown}",
                )
            targets[t.name] = t
    check_unique(list(targets.values()))
    return [targets[n] for n in sorted(targets)]


def check_unique(targets: list[Target]) -> None:
    """Outputs are unique across every spec (also the companions' names, case-insensitively), and
    a target name never equals another spec's group (the selector would be ambiguous)."""
    groups = {t.group: t for t in targets}
    outputs: dict[str, Target] = {}
    for t in sorted(targets, key=lambda t: (t.spec_shown, t.line)):
        if t.name in groups and groups[t.name].group != t.group:
            raise SpecError(t.spec_shown, t.line, f"targets.{t.name}",
                            f"has the name of the group in {groups[t.name].spec_shown}; "
                            f"`bindgen regen {t.name}` would be ambiguous: rename one")
        key = t.output[: -len(".py")].lower()
        prev = outputs.get(key)
        if prev is not None:
            raise SpecError(t.spec_shown, t.line, f"targets.{t.name}.output",
                            f"{t.output} is also the output of target {prev.name} "
                            f"({prev.spec_shown}:{prev.line}); give each target its own")
        outputs[key] = t
