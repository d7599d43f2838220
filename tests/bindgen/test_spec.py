"""Spec validation (every error names file:line, the key and what was expected) and the errors a
target's headers can produce (a missing header, clang errors, a missing include: never empty
structs)."""
from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pytest

from bindgen.errors import SpecError
from bindgen.spec import load_all, load_spec

from .conftest import CORPUS, generate_headers

GOOD = f"""\
group: tgrp
description: a test spec
sources:
  corpus:
    kind: system
    path: {CORPUS}
    package: bindgen-test-corpus
targets:
  one:
    description: one target
    headers: [corpus:t01_packed_bitfields.h]
"""


def spec(tmp_path: Path, text: str, name: str = "x.yaml") -> Path:
    specs = tmp_path / "specs"
    specs.mkdir(exist_ok=True)
    p = specs / name
    p.write_text(textwrap.dedent(text))
    return p


def load_err(tmp_path: Path, text: str) -> SpecError:
    p = spec(tmp_path, text)
    with pytest.raises(SpecError) as ei:
        load_spec(p, p.parent)
    return ei.value


def line_of(text: str, needle: str) -> int:
    for i, line in enumerate(textwrap.dedent(text).splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_good_spec_loads(tmp_path):
    p = spec(tmp_path, GOOD)
    sf = load_spec(p, p.parent)
    (t,) = sf.targets
    assert (sf.group, t.name, t.group, t.spec_file, t.output) == ("tgrp", "one", "tgrp", "x.yaml",
                                                                  "tgrp/one.py")
    assert [str(h) for h in t.headers] == ["corpus:t01_packed_bitfields.h"]
    assert t.keep_files == ("corpus:t01_packed_bitfields.h",)
    assert [s.name for s in t.sources] == ["corpus"] and t.sources[0].kind == "system"
    assert t.language == "c" and t.lazy is None and t.macros.enabled


def test_unknown_target_key_names_file_line_key_and_allowed(tmp_path):
    text = GOOD + "    headerz: [corpus:a.h]\n"
    e = load_err(tmp_path, text)
    msg = str(e)
    assert msg.startswith(f"x.yaml:{line_of(text, 'headerz')}: "), msg
    assert "targets.one.headerz" in msg and "unknown key" in msg
    for allowed in ("headers", "include_dirs", "clang_args", "keep", "macros", "libraries",
                    "patches", "lazy"):
        assert allowed in msg, (allowed, msg)
    assert e.line == line_of(text, "headerz")


def test_unknown_top_level_key(tmp_path):
    text = GOOD.replace("description: a test spec\n", "description: a test spec\nsourcez: {}\n")
    msg = str(load_err(tmp_path, text))
    assert f"x.yaml:{line_of(text, 'sourcez')}: sourcez: unknown key" in msg
    assert "group" in msg and "targets" in msg and "matrix" in msg


def test_unknown_source_key(tmp_path):
    text = GOOD.replace("    package: bindgen-test-corpus\n",
                        "    package: bindgen-test-corpus\n    version: 1\n")
    msg = str(load_err(tmp_path, text))
    assert f"x.yaml:{line_of(text, 'version: 1')}: sources.corpus.version: unknown key" in msg
    assert "kind, path, package" in msg


def test_unknown_source_kind(tmp_path):
    msg = str(load_err(tmp_path, GOOD.replace("kind: system", "kind: ftp")))
    assert "sources.corpus.kind" in msg and "system" in msg and "'ftp'" in msg


@pytest.mark.parametrize("edit, key, expected", [
    (("    headers: [corpus:t01_packed_bitfields.h]", "    headers: corpus:t01_packed_bitfields.h"),
     "targets.one.headers", "expected a list of strings"),
    (("    description: one target", "    description: one target\n    lazy: 'yes'"),
     "targets.one.lazy", "expected true, false or auto"),
    (("    description: one target", "    description: one target\n    clang_args: [[-DX]]"),
     "targets.one.clang_args", "expected a list of strings"),
    (("    description: one target", "    description: one target\n    keep: [a]"),
     "targets.one.keep", "expected a mapping"),
    (("    description: one target", "    description: one target\n    language: rust"),
     "targets.one.language", "expected one of c, c++"),
    (("    description: one target", "    description: one target\n    output: /abs/x.py"),
     "targets.one.output", "expected a relative path ending in .py"),
    (("group: tgrp", "group: [tgrp]"), "group", "expected a string"),
])
def test_wrong_types(tmp_path, edit, key, expected):
    text = GOOD.replace(*edit)
    assert text != GOOD
    msg = str(load_err(tmp_path, text))
    assert re.match(r"x\.yaml:\d+: ", msg), msg
    assert f"{key}: {expected}" in msg, msg


def test_wrong_type_line_is_the_value_line(tmp_path):
    text = GOOD.replace("    description: one target", "    description: one target\n    lazy: 3")
    e = load_err(tmp_path, text)
    assert e.line == line_of(text, "lazy: 3"), str(e)


@pytest.mark.parametrize("edit, key", [
    (("group: tgrp\n", ""), "group"),
    (("    path: " + str(CORPUS) + "\n", ""), "sources.corpus.path"),
    (("    headers: [corpus:t01_packed_bitfields.h]\n", ""), "targets.one.headers"),
])
def test_missing_required_key(tmp_path, edit, key):
    text = GOOD.replace(*edit)
    assert text != GOOD
    msg = str(load_err(tmp_path, text))
    assert re.match(r"x\.yaml:\d+: ", msg), msg
    assert key in msg and ("required" in msg or "needs at least one" in msg), msg


def test_no_targets(tmp_path):
    text = GOOD[:GOOD.index("targets:")] + "targets: {}\n"
    assert "at least one target" in str(load_err(tmp_path, text))


def test_unknown_source_in_headers(tmp_path):
    text = GOOD.replace("[corpus:t01_packed_bitfields.h]", "[corpus:a.h, kernel:linux/x.h]")
    msg = str(load_err(tmp_path, text))
    assert f"x.yaml:{line_of(text, 'kernel:linux')}: targets.one.headers" in msg
    assert "unknown source 'kernel'" in msg and "declared: corpus" in msg


def test_header_without_source_prefix(tmp_path):
    msg = str(load_err(tmp_path, GOOD.replace("[corpus:t01_packed_bitfields.h]", "[a.h]")))
    assert "expected SOURCE:PATH" in msg and "'a.h'" in msg


def test_unknown_source_in_include_dirs(tmp_path):
    text = GOOD + "    include_dirs: [nowhere:include]\n"
    msg = str(load_err(tmp_path, text))
    assert "targets.one.include_dirs" in msg and "unknown source 'nowhere'" in msg


def test_bad_regex_in_drop_patch(tmp_path):
    text = GOOD + '    patches:\n      - drop: "foo(["\n        why: testing\n'
    msg = str(load_err(tmp_path, text))
    assert "targets.one.patches[0].drop" in msg and "bad regular expression" in msg, msg
    assert f"x.yaml:{line_of(text, 'foo([')}:" in msg


def test_bad_regex_in_keep_names(tmp_path):
    msg = str(load_err(tmp_path, GOOD + "    keep: {names: ['a)']}\n"))
    assert "targets.one.keep.names" in msg and "bad regular expression" in msg


def test_patch_needs_why_and_one_op(tmp_path):
    msg = str(load_err(tmp_path, GOOD + "    patches:\n      - drop: foo\n"))
    assert "patches[0].why" in msg and "required" in msg
    msg = str(load_err(tmp_path, GOOD + "    patches:\n      - {drop: a, extra: b, why: c}\n"))
    assert "patches[0]" in msg and "exactly one of" in msg
    msg = str(load_err(tmp_path, GOOD + "    patches:\n      - {rename: {from: a}, why: c}\n"))
    assert "patches[0].rename.to" in msg and "required" in msg


def test_duplicate_key(tmp_path):
    text = GOOD + "  one:\n    headers: [corpus:t02_next_unit.h]\n"
    e = load_err(tmp_path, text)
    assert "duplicate key" in str(e) and "one" in str(e)
    assert e.line == len(textwrap.dedent(text).splitlines()) - 1, str(e)


def test_duplicate_key_nested(tmp_path):
    text = GOOD.replace("    kind: system\n", "    kind: system\n    kind: debian\n")
    e = load_err(tmp_path, text)
    assert str(e).startswith(f"x.yaml:{line_of(text, 'kind: debian')}: kind: "
                             "duplicate key"), str(e)


def test_invalid_yaml(tmp_path):
    msg = str(load_err(tmp_path, GOOD + "  two: [unclosed\n"))
    assert "invalid YAML" in msg and msg.startswith("x.yaml:")


MATRIX = f"""\
group: nv
matrix:
  - {{ver: "570", tag: 570.86.16}}
  - {{ver: "580", tag: 580.142}}
sources:
  ogkm_${{ver}}:
    kind: system
    path: {CORPUS}/${{tag}}
    package: pkg-${{ver}}
targets:
  nv_${{ver}}:
    description: NVIDIA ${{tag}}
    headers:
      - ogkm_${{ver}}:src/common/sdk/nvidia/inc/nvos.h
    clang_args: ["-DNV_VERSION=${{ver}}"]
"""


def test_matrix_gives_one_target_per_parameter_set(tmp_path):
    p = spec(tmp_path, MATRIX, "nv.yaml")
    sf = load_spec(p, p.parent)
    assert [t.name for t in sf.targets] == ["nv_570", "nv_580"]
    t570, t580 = sf.targets
    assert t570.output == "nv/nv_570.py" and t580.output == "nv/nv_580.py"
    assert [str(h) for h in t570.headers] == ["ogkm_570:src/common/sdk/nvidia/inc/nvos.h"]
    assert t580.sources[0].name == "ogkm_580" and t580.sources[0].path == f"{CORPUS}/580.142"
    assert t570.sources[0].package == "pkg-570"
    assert t570.clang_args == ("-DNV_VERSION=570",) and t580.description == "NVIDIA 580.142"


def test_matrix_undefined_parameter(tmp_path):
    text = MATRIX.replace("NVIDIA ${tag}", "NVIDIA ${branch}")
    msg = str(load_err(tmp_path, text))
    assert "${branch}" in msg and "not defined in the matrix" in msg, msg


def test_parameter_without_matrix(tmp_path):
    msg = str(load_err(tmp_path, GOOD.replace("description: one target",
                                              "description: ${undefined}")))
    assert "${undefined}" in msg and "not defined" in msg, msg


def test_matrix_repeating_names(tmp_path):
    text = MATRIX.replace("nv_${ver}:", "nv_all:")
    msg = str(load_err(tmp_path, text))
    assert "repeat" in msg and "nv_all" in msg


def test_load_all_rejects_a_target_defined_twice(tmp_path):
    spec(tmp_path, GOOD, "a.yaml")
    p = spec(tmp_path, GOOD.replace("group: tgrp", "group: other"), "b.yaml")
    with pytest.raises(SpecError, match=r"b\.yaml:\d+: targets\.one: also defined in "
                                        r"a\.yaml"):
        load_all(p.parent)


def test_load_all_sorted(tmp_path):
    spec(tmp_path, GOOD.replace("  one:", "  zzz:"), "a.yaml")
    p = spec(tmp_path, GOOD.replace("group: tgrp", "group: other"), "b.yaml")
    assert [t.name for t in load_all(p.parent)] == ["one", "zzz"]


def test_the_repo_specs_load():
    from .conftest import SPECS
    targets = load_all(SPECS)
    assert targets and len({t.name for t in targets}) == len(targets)
    assert {"kfd_ioctl", "vfio", "pci_regs"} <= {t.name for t in targets}


# ---------------------------------------------------------------- header-level errors (need clang)


def write_header(tmp_path: Path, name: str, text: str) -> Path:
    d = tmp_path / "hdrs"
    (d / name).parent.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(textwrap.dedent(text))
    return d


def test_missing_header_is_a_source_error_naming_it(tmp_path):
    from bindgen.errors import SourceError
    d = write_header(tmp_path, "present.h", "struct p { int a; };\n")
    with pytest.raises(SourceError, match=r"corpus:sub/absent\.h"):
        generate_headers(tmp_path, ["present.h", "sub/absent.h"], source_dir=d)


def test_missing_source_folder_says_how_to_supply_it(tmp_path):
    from bindgen.errors import SourceError
    with pytest.raises(SourceError) as ei:
        generate_headers(tmp_path, ["a.h"], source_dir=tmp_path / "not-there")
    msg = str(ei.value)
    assert "bindgen-test-corpus" in msg and "--source corpus=DIR" in msg
    assert "BINDGEN_SOURCE_CORPUS" in msg


def test_clang_error_has_relative_location(tmp_path):
    from bindgen.errors import ClangError
    d = write_header(tmp_path, "bad.h", """\
        /* line 1 */
        struct x {
        \tunknown_t a;
        };
    """)
    with pytest.raises(ClangError) as ei:
        generate_headers(tmp_path, ["bad.h"], source_dir=d)
    msg = str(ei.value)
    assert re.search(r"corpus:bad\.h:3:\d+: error: unknown type name 'unknown_t'", msg), msg
    assert str(tmp_path) not in msg and str(d) not in msg, msg


def test_clang_error_in_an_included_header(tmp_path):
    from bindgen.errors import ClangError
    d = write_header(tmp_path, "inner.h", "int f(;\n")
    write_header(tmp_path, "outer.h", '#include "inner.h"\nstruct o { int a; };\n')
    with pytest.raises(ClangError) as ei:
        generate_headers(tmp_path, ["outer.h"], source_dir=d)
    assert re.search(r"corpus:inner\.h:1:\d+: error", str(ei.value)), str(ei.value)
    assert str(d) not in str(ei.value)


# (not <stdint.h>: clang's builtin headers, searched by default, have one)
@pytest.mark.parametrize("include", ['"gone.h"', "<stdio.h>", "<linux/types.h>"])
def test_missing_include_is_fatal_never_empty_structs(tmp_path, include):
    from bindgen.errors import ClangError
    d = write_header(tmp_path, "inc.h", f"""\
        #include {include}
        struct s {{ int a; }};
    """)
    with pytest.raises(ClangError) as ei:
        generate_headers(tmp_path, ["inc.h"], source_dir=d)
    msg = str(ei.value)
    assert "corpus:inc.h:1:" in msg and "not found" in msg, msg
    assert str(d) not in msg


def test_header_read_from_outside_the_sources_is_an_error(tmp_path):
    from bindgen.errors import SourceError
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "stray.h").write_text("struct stray { int a; };\n")
    d = write_header(tmp_path, "main.h", f'#include "{outside / "stray.h"}"\n')
    with pytest.raises(SourceError, match=r"stray\.h was read from outside every declared source"):
        generate_headers(tmp_path, ["main.h"], source_dir=d)


def test_include_dirs_are_the_only_search_path(tmp_path):
    """With the folder declared as an include dir the same header parses, and the report lists
    every header read with its sha256 (the lock against upstream drift)."""
    d = write_header(tmp_path, "sub/types.h", "typedef unsigned int u32;\n")
    write_header(tmp_path, "user.h", "#include <types.h>\nstruct u { u32 a; };\n")
    g, mod = generate_headers(tmp_path, ["user.h"], source_dir=d, include_dirs=["corpus:sub"])
    assert mod.u.a.offset == 0
    import hashlib
    sha = hashlib.sha256((d / "sub" / "types.h").read_bytes()).hexdigest()
    assert f"{sha}  corpus:sub/types.h" in g.report
    assert "corpus:user.h" in g.report and str(d) not in g.report


def test_unsupported_member_type_is_reported_and_its_users_too(tmp_path):
    """A record with a member bindgen cannot represent (_Complex) is left out with the reason in the
    report (design: unsupported constructs are collected into the report), and so is every record
    that embeds it by value; the rest of the target is still generated and the module loads."""
    d = write_header(tmp_path, "cx.h", """\
        struct cx { _Complex double z; int k; };
        struct holds_cx { struct cx a; int b; };
        struct points_at_cx { struct cx *p; int x; };
        struct plain { int ok; };
    """)
    g, mod = generate_headers(tmp_path, ["cx.h"], source_dir=d)
    assert mod.plain.ok.offset == 0
    assert not hasattr(mod, "cx") and not hasattr(mod, "holds_cx")
    assert re.search(r"^\S+ cx: .*_Complex", g.report, re.M), g.report
    assert re.search(r"^\S+ holds_cx: .*\bcx\b", g.report, re.M), g.report
    if hasattr(mod, "points_at_cx"):
        import ctypes
        assert ctypes.sizeof(mod.points_at_cx) == 16
    else:
        assert re.search(r"^\S+ points_at_cx: ", g.report, re.M), g.report


def test_system_source_without_package(tmp_path):
    """A plain local folder is a ``system`` source without a ``package``; a missing
    folder then says to create it or supply it, not to install an empty package name."""
    from bindgen.errors import SourceError
    from bindgen.sources import Sources
    text = GOOD.replace("    package: bindgen-test-corpus\n", "")
    assert text != GOOD
    (tmp_path / "x.yaml").write_text(text)
    sf = load_spec(tmp_path / "x.yaml", tmp_path)
    src = sf.targets[0].sources[0]
    assert src.kind == "system" and src.package == ""
    assert Sources(tmp_path / "cache").resolve(src).root == CORPUS
    gone = dataclasses.replace(src, path=str(tmp_path / "nowhere"))
    with pytest.raises(SourceError, match=r"is missing; create it or supply it with --source"):
        Sources(tmp_path / "cache").resolve(gone)
