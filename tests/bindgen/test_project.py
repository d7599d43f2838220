"""Project paths come from flags and/or ``[tool.bindgen]`` in the nearest pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from bindgen.project import ProjectError, load_project

from .conftest import REPO


def _pyproject(root: Path, body: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(body)


def test_config_is_found_from_a_subfolder(tmp_path):
    _pyproject(tmp_path, '[tool.bindgen]\nspecs = "sp"\nout = "src/mybind"\n')
    (tmp_path / "sp").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    p = load_project(cwd=deep)
    assert (p.root, p.specs, p.out) == (tmp_path, tmp_path / "sp", tmp_path / "src" / "mybind")
    assert p.package == "mybind"  # the folder's name when no package is given
    assert p.shown(p.out / "x" / "y.py") == "src/mybind/x/y.py"
    assert p.module_name("x/y.py") == "mybind.x.y"


def test_flags_override_the_config_relative_to_the_cwd(tmp_path):
    _pyproject(tmp_path, '[tool.bindgen]\nspecs = "sp"\nout = "gen"\npackage = "pkg"\n')
    (tmp_path / "sp").mkdir()
    (tmp_path / "other").mkdir()
    p = load_project(specs="other", package="x.y", cwd=tmp_path)
    assert (p.specs, p.out, p.package) == (tmp_path / "other", tmp_path / "gen", "x.y")


def test_a_pyproject_without_the_table_is_skipped(tmp_path):
    _pyproject(tmp_path, '[tool.bindgen]\nspecs = "sp"\nout = "gen"\n')
    (tmp_path / "sp").mkdir()
    _pyproject(tmp_path / "inner", '[project]\nname = "x"\n')
    assert load_project(cwd=tmp_path / "inner").specs == tmp_path / "sp"


def test_missing_paths_say_how_to_give_them(tmp_path):
    with pytest.raises(ProjectError, match=r"no specs folder: pass --specs DIR or set"):
        load_project(cwd=tmp_path)
    (tmp_path / "sp").mkdir()
    with pytest.raises(ProjectError, match=r"no out folder: pass --out DIR"):
        load_project(specs="sp", cwd=tmp_path)
    with pytest.raises(ProjectError, match=r"specs folder .*nope does not exist"):
        load_project(specs="nope", out="g", cwd=tmp_path)


@pytest.mark.parametrize(
    "body, msg",
    [
        ('[tool.bindgen]\nspecs = "sp"\nspec = "x"\n', r"unknown key\(s\) spec \(known: specs, "),
        ("[tool.bindgen]\nspecs = 3\n", r"specs must be a string"),
        ("[tool.bindgen\n", r"cannot read it as TOML"),
        ('[tool]\nbindgen = "x"\n', r"\[tool.bindgen\] must be a table"),
    ],
)
def test_bad_config_is_named(tmp_path, body, msg):
    _pyproject(tmp_path, body)
    with pytest.raises(ProjectError, match=msg):
        load_project(cwd=tmp_path)


def test_bad_package_name(tmp_path):
    (tmp_path / "sp").mkdir()
    with pytest.raises(ProjectError, match=r"package name '9x' is not a Python module path"):
        load_project(specs="sp", out="gen", package="9x", cwd=tmp_path)
    with pytest.raises(ProjectError, match=r"package name 'my-bind'"):
        load_project(specs="sp", out="my-bind", cwd=tmp_path)


def test_this_repository_configures_itself():
    p = load_project(cwd=REPO / "runtime")
    assert (p.specs, p.out, p.package) == (REPO / "bindgen" / "specs", REPO / "generated",
                                           "hcq_bindings")
