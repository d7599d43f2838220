"""The ``select`` and ``naming`` passes: on a small declaration index built from plain IR (what the
parser would hand over, no clang), then through libclang on small headers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bindgen import ir
from bindgen.cexpr import MacroDef
from bindgen.decls import Converted, Decl, Declarations
from bindgen.parse import ParseResult
from bindgen.passes import Context, naming, select

from .conftest import generate_headers, load_target, write_spec

I32 = ir.Prim("c_int32", 4, 4, True)
U32 = ir.Prim("c_uint32", 4, 4)
HDR = "corpus:x.h"


class Index:
    """Builds a :class:`Declarations` the way the parser does: facts per key, IR named by keys."""

    def __init__(self) -> None:
        self.top: list[Decl] = []
        self.info: dict[str, Decl] = {}
        self.conv: dict[str, Converted] = {}
        self.converted: list[str] = []

    def add(self, key: str, kind: str, spelling: str, node=None, *, error: str = "",
            uses: tuple[str, ...] = (), positions: tuple[int, ...] = (), top: bool = True,
            file: str | None = HDR, line: int = 1, **facts) -> str:
        loc = ir.Location(file, line) if file else None
        d = Decl(key, kind, spelling, loc, line, **facts)
        self.info.setdefault(key, d)
        if top:
            self.top.append(d)
        if node is not None and isinstance(node, ir.Record) and not positions:
            positions = tuple(range(len(node.fields)))
        self.conv[key] = Converted(node, uses, error, positions)
        return key

    def record(self, key: str, spelling: str, fields=(), **kw) -> str:
        c_name = f"struct {spelling}" if spelling else ""
        rec = ir.Record(key, "struct", 4 * max(len(fields), 1), 4, tuple(fields),
                        loc=ir.Location(kw.get("file", HDR), kw.get("line", 1)), c_name=c_name)
        uses = kw.pop("uses", None) or tuple(dict.fromkeys(
            k for f in fields for k in select._keys(f.type)))
        return self.add(key, "record", spelling, rec, uses=uses, **kw)

    def declarations(self) -> Declarations:
        def convert(key: str) -> Converted:
            self.converted.append(key)
            return self.conv[key]
        return Declarations(self.top, self.info, convert)


def field(name: str, t: ir.Type, offset: int = 0, anonymous: bool = False) -> ir.Field:
    return ir.Field(name, t, offset, None, anonymous, "", ir.Location(HDR, 1))


def rec_ref(key: str) -> ir.Named:
    return ir.Named(key, "record")


@pytest.fixture(scope="module")
def target_of(tmp_path_factory):
    """A real Target from a spec with the given target options (keep rules, libraries)."""
    made = {}

    def make(**opts):
        key = repr(sorted(opts.items()))
        if key not in made:
            d = tmp_path_factory.mktemp("spec")
            path = write_spec(d / "specs", {"t": {"headers": ["corpus:x.h"], **opts}}, file="t")
            made[key] = load_target(path, "t")
        return made[key]

    return make


def run(target, idx: Index, *, macros=(), record_keys=None, passes=("select", "naming")):
    pr = ParseResult(idx.declarations(), list(macros), {}, {}, record_keys or {}, [])
    ctx = Context(target, pr)
    if "select" in passes:
        select.select(ctx)
    if "naming" in passes:
        naming.name(ctx)
    return ctx


def names(items) -> list[str]:
    return [it.name for it in items]


def test_the_pipeline_selects_and_names_first_and_each_pass_says_what_it_reads():
    import sys

    from bindgen.passes import PIPELINE

    order = [p.name for p in PIPELINE]
    assert order == ["select", "naming", "macros", "macro_records", "tables", "macro_docs",
                     "patches", "enum_classes", "dedupe", "order"]
    for p in PIPELINE:
        doc = sys.modules[p.run.__module__].__doc__ or ""
        assert doc.startswith(f"Pass ``{p.name}``") and "Reads" in doc, p.run.__module__


# ---------------------------------------------------------------- select


def test_roots_are_kept_files_and_names_plus_everything_they_use(target_of):
    idx = Index()
    idx.add("T@u32", "typedef", "u32", ir.Typedef("T@u32", U32), file="corpus:other.h")
    idx.record("S@inner", "inner", [field("v", ir.Named("T@u32", "typedef"))],
               file="corpus:other.h")
    idx.record("S@unused", "unused", [field("v", I32)], file="corpus:other.h")
    idx.record("S@outer", "outer", [field("p", ir.Pointer(rec_ref("S@inner")))])
    idx.record("S@skipme", "skipme", [field("v", I32)])
    idx.record("S@anon@3:1", "", [field("v", I32)], line=3)  # never a root
    ctx = run(target_of(keep={"exclude": ["^skip"]}), idx, passes=("select",))
    m = ctx.module
    assert names(m.records) == ["S@outer", "S@inner"]  # keys, in the order reached
    assert names(m.typedefs) == ["T@u32"]
    # Only what was kept was converted: the unused record and the excluded one never were.
    assert sorted(idx.converted) == ["S@inner", "S@outer", "T@u32"]


def test_keep_names_see_the_c_name_and_an_anonymous_enum_its_python_name(target_of):
    idx = Index()
    idx.add("E@a", "enum", "", ir.Enum("E@a", U32, (("A", 1),)), line=7)
    idx.add("E@b", "enum", "", ir.Enum("E@b", U32, (("B", 1),)), line=9)
    idx.add("E@color", "enum", "color", ir.Enum("E@color", U32, (("RED", 0),)))
    ctx = run(target_of(keep={"names": ["^anon_enum_7$", "^color$"]}), idx)
    assert names(ctx.module.enums) == ["anon_enum_7", "color"]


def test_what_cannot_be_represented_takes_its_users_along_cycles_included(target_of):
    idx = Index()
    idx.add("S@bad", "record", "bad", error="x.h:1: field bad.z: type '_Complex double' (kind "
            "COMPLEX)")
    idx.record("S@holds", "holds", [field("a", rec_ref("S@bad")), field("b", rec_ref("S@ok"))])
    idx.record("S@ok", "ok", [field("v", I32)], top=False)
    # y and z point at each other; z also holds bad: both go, however they are reached.
    idx.record("S@y", "y", [field("z", ir.Pointer(rec_ref("S@z")))])
    idx.record("S@z", "z", [field("y", ir.Pointer(rec_ref("S@y"))), field("b", rec_ref("S@bad"))])
    idx.add("T@bad_t", "typedef", "bad_t", ir.Typedef("T@bad_t", rec_ref("S@bad")),
            uses=("S@bad",))
    ctx = run(target_of(), idx)
    m = ctx.module
    assert names(m.records) == ["ok"]  # needed by a kept record, representable: still emitted
    assert m.typedefs == []
    why = {s.name: (s.what, s.reason) for s in m.skipped}
    assert set(why) == {"bad", "holds", "y", "z", "bad_t"}
    assert why["bad"] == ("record", "x.h:1: field bad.z: type '_Complex double' (kind COMPLEX)")
    assert why["holds"][1] == "corpus:x.h:1: field holds.a: uses record bad, which is not emitted"
    assert why["y"][1] == "corpus:x.h:1: field y.z: uses record z, which is not emitted"
    assert why["bad_t"] == ("typedef", "uses record bad, which is not emitted")


def test_functions_and_variables_need_a_library_and_must_be_callable(target_of):
    def funcs(idx: Index) -> None:
        idx.add("F@f", "function", "f", ir.Function("F@f", ir.FuncType(I32, (I32,)), ("", )))
        idx.add("F@g", "function", "g", inline="static inline")
        idx.add("F@ns", "function", "ns", ir.Function("F@ns", ir.FuncType(I32, ()), ()),
                namespace=True)
        idx.add("V@v", "variable", "v", ir.Var("V@v", I32))
        idx.record("U@u", "u", [field("a", I32), field("b", U32)])
        idx.info["U@u"] = Decl("U@u", "record", "u", ir.Location(HDR, 1), 1)
        idx.conv["U@u"] = Converted(
            ir.Record("U@u", "union", 4, 4, (field("a", I32), field("b", U32)), c_name="union u"),
            (), "", (0, 1))
        idx.add("F@byval", "function", "byval",
                ir.Function("F@byval", ir.FuncType(I32, (rec_ref("U@u"),)), ("x",)),
                uses=("U@u",))

    idx = Index()
    funcs(idx)
    m = run(target_of(), idx).module
    assert m.functions == [] and m.variables == []
    why = {s.name: (s.what, s.reason) for s in m.skipped}
    assert why["g"] == ("inline function", "static inline function: its body is C code in the "
                        "header and no library exports it (`wrap_static_fns: true` binds it "
                        "through a compiled wrapper)")
    assert why["f"] == ("function", "no library declared for this target")
    assert why["v"] == ("variable", "no library declared for this target")
    assert "ns" not in why  # C++ namespace functions are never roots

    idx = Index()
    funcs(idx)
    m = run(target_of(libraries=[{"name": "lib", "candidates": ["libx.so"]}]), idx).module
    assert [(f.name, f.library, f.param_names) for f in m.functions] == [("f", "lib", ("arg0",))]
    assert [(v.name, v.library) for v in m.variables] == [("v", "lib")]
    assert m.libraries == [("lib", ("libx.so",))]
    byval = next(s for s in m.skipped if s.name == "byval")
    assert "union u by value (a union: libffi has no union type)" in byval.reason
    assert names(m.records) == ["u"]  # the types a refused function names stay


def test_a_long_chain_is_walked_without_recursion(target_of):
    idx = Index()
    n = 5_000  # a recursive walk would need ~3 frames a link: 15,000 > Python's 1,000
    for i in range(n):
        fields = [field("v", I32)] + ([field("prev", ir.Pointer(rec_ref(f"S@s{i - 1}")))] if i
                                      else [])
        idx.record(f"S@s{i}", f"s{i}", fields, top=(i == n - 1))
    t0 = time.perf_counter()
    m = run(target_of(), idx).module
    assert len(m.records) == n and time.perf_counter() - t0 < 5


def test_kept_macros_follow_the_files_and_names(target_of):
    loc = ir.Location
    macros = [MacroDef("A_X", None, ("1",), loc(HDR, 1)), MacroDef("B_X", None, ("1",), loc(HDR, 2)),
              MacroDef("A_Y", None, ("1",), loc("corpus:other.h", 1)),
              MacroDef("CMDLINE", None, ("1",))]
    assert select.kept_macros(target_of(), macros) == {"A_X", "B_X"}
    assert select.kept_macros(target_of(keep={"names": ["^A_"]}), macros) == {"A_X"}


# ---------------------------------------------------------------- naming


def test_names_follow_the_documented_rules(target_of):
    idx = Index()
    # struct class { int in; struct {..} m; union {..}; struct {..}; int :3; union {..}; };
    idx.add("S@class", "record", "class", ir.Record(
        "S@class", "struct", 24, 4, (
            field("in", I32),
            field("m", rec_ref("S@class@m")),
            field("", rec_ref("S@class@u"), anonymous=True),
            field("", rec_ref("S@class@s"), anonymous=True),
            field("", rec_ref("S@class@u2"), anonymous=True),
        ), c_name="struct class"),
        uses=("S@class@m", "S@class@u", "S@class@s", "S@class@u2"),
        positions=(0, 1, 2, 3, 5))  # position 4: an unnamed bitfield, not in the IR
    for key, member, nested in (("S@class@m", "m", 0), ("S@class@u", "", 1),
                                ("S@class@s", "", 2), ("S@class@u2", "", 3)):
        idx.record(key, "", [field("x", I32)], top=False, parent="S@class", member=member,
                   nested_index=nested)
    idx.record("S@deep", "", [field("x", I32)], top=False, parent="S@class@u", member="lambda")
    idx.record("S@file", "", [field("x", I32)], top=False, line=12, file_base="my-file.h")
    idx.add("E@e", "enum", "", ir.Enum("E@e", U32, (("V", 1),)), line=40)
    idx.add("T@from", "typedef", "from", ir.Typedef("T@from", rec_ref("S@file")),
            uses=("S@file",))
    idx.add("T@class", "typedef", "class", ir.Typedef("T@class", rec_ref("S@class")),
            uses=("S@class",))
    idx.add("T@holder", "typedef", "holder", ir.Typedef("T@holder", rec_ref("S@deep")),
            uses=("S@deep",))
    idx.add("F@def", "function", "def", ir.Function("F@def", ir.FuncType(
        I32, (I32, ir.Pointer(ir.Named("T@from", "typedef")))), ("None", "")),
        uses=("T@from",))
    ctx = run(target_of(libraries=[{"name": "lib", "candidates": ["libx.so"]}]), idx,
              record_keys={"struct class": "S@class", "class": "S@class"})
    m = ctx.module
    assert names(m.records) == ["anon_my_file_h_12", "class_", "class__anon1",
                                "class__anon1_lambda", "class__anon2", "class__anon3", "class__m"]
    cls = next(r for r in m.records if r.name == "class_")
    assert [(f.name, f.type) for f in cls.fields] == [
        ("in_", I32), ("m", ir.Named("class__m", "record")),
        ("_anon2", ir.Named("class__anon1", "record")),
        ("_anon3", ir.Named("class__anon2", "record")),
        ("_anon5", ir.Named("class__anon3", "record")),
    ]
    assert names(m.enums) == ["anon_enum_40"]
    # typedef class class: folded into the record; keywords get their underscore
    assert [(t.name, t.type) for t in m.typedefs] == [
        ("from_", ir.Named("anon_my_file_h_12", "record")),
        ("holder", ir.Named("class__anon1_lambda", "record"))]
    (f,) = m.functions
    # a keyword gets its underscore; the symbol looked up in the library keeps its C name
    assert (f.name, f.symbol, f.param_names) == ("def_", "def", ("None_", "arg1"))
    assert f.type.params[1] == ir.Pointer(ir.Named("from_", "typedef"))
    assert ctx.record_names == {"struct class": "class_", "class": "class_"}


def test_one_name_for_two_declarations_keeps_the_first_and_says_so(target_of):
    idx = Index()
    # struct a_b, and struct a's member b of anonymous type: both would be `a_b`.
    idx.record("S@a_b", "a_b", [field("x", I32)])
    idx.record("S@a", "a", [field("b", rec_ref("S@a@b"))])
    idx.record("S@a@b", "", [field("y", U32)], top=False, parent="S@a", member="b")
    m = run(target_of(), idx).module
    assert names(m.records) == ["a", "a_b"]
    a = next(r for r in m.records if r.name == "a")
    assert a.fields[0].type == ir.Named("a_b", "record")
    (s,) = m.skipped
    assert s.name == "a_b" and s.what == "record"
    assert "its Python name a_b is that of the record at corpus:x.h:1" in s.reason


# ---------------------------------------------------------------- through libclang


def _header(tmp: Path, name: str, text: str) -> Path:
    d = tmp / "hdr"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d


def test_a_header_through_parse_select_and_naming(tmp_path):
    d = _header(tmp_path, "sel.h", """\
        #include "dep.h"
        struct sel_pkt { int in; unsigned :3; union { int a; float f; }; struct dep *d; };
        struct sel_other { int x; };
        typedef struct sel_pkt sel_pkt;
        enum { SEL_ONE = 1 };
    """.replace("        ", ""))
    (d / "dep.h").write_text("struct dep { int v; };\nstruct dep_unused { int w; };\n")
    g, mod = generate_headers(tmp_path, ["sel.h"], source_dir=d, keep={"exclude": ["other"]})
    names_ = {r.name for r in g.module.records}
    assert names_ == {"sel_pkt", "sel_pkt_anon0", "dep"}  # dep: used; dep_unused: not
    rec = next(r for r in g.module.records if r.name == "sel_pkt")
    assert [f.name for f in rec.fields] == ["in_", "_anon2", "d"]  # :3 is member 1
    assert mod.sel_pkt(in_=3).in_ == 3 and mod.sel_pkt.d.offset == 16
    assert mod.SEL_ONE == 1 and "sel_pkt" not in {t.name for t in g.module.typedefs}
    assert [e.name for e in g.module.enums] == ["anon_enum_5"]


def test_cxx_namespaces_keep_types_but_not_functions(tmp_path):
    d = _header(tmp_path, "ns.hpp", """\
        namespace outer { namespace inner {
        enum class mode : unsigned char { A = 1, B = 2 };
        struct cfg { mode m; int n; };
        using cfg_t = cfg;
        int helper(cfg c);
        } }
        class top_level { public: int x; };
    """.replace("        ", ""))
    g, mod = generate_headers(tmp_path, ["ns.hpp"], source_dir=d, language="c++",
                              libraries=[{"name": "none", "candidates": ["libnone.so"]}])
    m = g.module
    assert {r.name for r in m.records} == {"cfg", "top_level"}
    assert [e.name for e in m.enums] == ["mode"] and [t.name for t in m.typedefs] == ["cfg_t"]
    assert m.functions == [] and not any(s.name == "helper" for s in m.skipped)
    assert mod.cfg.n.offset == 4 and mod.B == 2
