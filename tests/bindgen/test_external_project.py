"""bindgen for a project that is not this one, as its README would tell a newcomer to use it.

A temporary project with its own pyproject.toml (``[tool.bindgen]``), spec and header: ``bindgen
regen`` from its folder writes its package, a program imports it, ``bindgen check`` is clean,
editing the header makes ``check`` fail. The generated package is then read as tools read it:
mypy resolves record types and rejects a misspelt constant (eager and lazy modules alike), jedi
completes names and jumps to their definitions, and tracebacks and ``inspect.getsource`` of lazily
compiled definitions show the real file and line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import REPO

BINDGEN = [sys.executable, "-m", "bindgen"]

HEADER = """\
#ifndef WIDGET_H
#define WIDGET_H

/** What one widget call takes. */
struct widget_args {
	unsigned long long addr;  /* where the widget lives */
	unsigned int size;        /* bytes */
	unsigned int mode : 3;    /* WIDGET_MODE_* */
	struct widget_args *next;
};

#define WIDGET_MAGIC 0x57     /* the ioctl type */
#define WIDGET_MODE_FAST 1
#define WIDGET_SCALE(x) (((x) & 0xffff) << 4)
#define WIDGET_BIT(x) (1 << (x))

#endif
"""

SPEC = """\
group: widgets
description: bindings for the widget library
sources:
  widget:
    kind: system
    path: {src}
    package: widget-dev
targets:
  widget:
    description: the widget API (widget.h)
    headers: [widget:widget.h]
  widget_lazy:
    description: the same, as a lazy module
    headers: [widget:widget.h]
    lazy: true
"""

PYPROJECT = """\
[project]
name = "widget-bindings"
version = "1.0"

[tool.bindgen]
specs = "bindgen_specs"
out = "src/widgetbind"
"""


def _run(cmd: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(cwd / "src"), str(REPO)]))
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=300,
                          **kw)  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("widget-project")
    (root / "include").mkdir()
    (root / "include" / "widget.h").write_text(HEADER)
    (root / "bindgen_specs").mkdir()
    (root / "bindgen_specs" / "widgets.yaml").write_text(SPEC.format(src=root / "include"))
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "src").mkdir()
    r = _run(BINDGEN + ["regen", "--cache", str(root / "cache")], root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "regen: 2 ok, 0 failed" in r.stdout
    return root


def test_regen_writes_the_projects_package_and_check_is_clean(project: Path) -> None:
    pkg = project / "src" / "widgetbind" / "widgets"
    assert sorted(p.name for p in pkg.iterdir() if p.suffix == ".py") == [
        "__init__.py", "_widget_lazy.py", "widget.py", "widget_lazy.py"
    ]
    text = (pkg / "widget.py").read_text()
    assert "# spec: bindgen_specs/widgets.yaml  target: widget" in text
    assert str(project) not in text  # nothing of where the project lives
    use = (
        "from widgetbind.widgets import widget, widget_lazy\n"
        "for m in (widget, widget_lazy):\n"
        "    a = m.widget_args(addr=1, size=2, mode=5)\n"
        "    print(a.mode, m.WIDGET_MAGIC, m.WIDGET_SCALE(2), m.widget_args.__module__)\n"
    )
    r = _run([sys.executable, "-c", use], project)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == [
        "5 87 32 widgetbind.widgets.widget", "5 87 32 widgetbind.widgets._widget_lazy"
    ]
    r = _run(BINDGEN + ["check", "--cache", str(project / "cache")], project)
    assert r.returncode == 0 and "check: 2 target(s) clean" in r.stdout, r.stdout + r.stderr


def test_check_fails_after_the_header_changes(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "p"
    import shutil

    shutil.copytree(project, copy)
    spec = copy / "bindgen_specs" / "widgets.yaml"
    spec.write_text(SPEC.format(src=copy / "include"))
    r = _run(BINDGEN + ["regen", "--cache", str(copy / "cache")], copy)
    assert r.returncode == 0, r.stderr
    h = copy / "include" / "widget.h"
    h.write_text(h.read_text().replace("0x57", "0x58"))
    r = _run(BINDGEN + ["check", "--cache", str(copy / "cache")], copy)
    assert r.returncode == 1, r.stdout
    assert "DRIFT widget" in r.stdout and "-WIDGET_MAGIC = 0x57" in r.stdout
    assert "+WIDGET_MAGIC = 0x58" in r.stdout


def test_mypy_sees_types_and_rejects_a_misspelt_constant(project: Path) -> None:
    user = project / "src" / "user.py"
    user.write_text(textwrap.dedent("""\
        from widgetbind.widgets import widget, widget_lazy

        a = widget.widget_args(addr=1)
        reveal_type(a)
        reveal_type(a.size)
        reveal_type(widget_lazy.widget_args)
        reveal_type(widget_lazy.WIDGET_MAGIC)
        x: int = widget.WIDGET_MAGC
        y: int = widget_lazy.WIDGET_MODE_FSAT
    """))
    r = _run([sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
              "src/user.py"], project)
    out = r.stdout
    assert 'Revealed type is "widgetbind.widgets.widget.widget_args"' in out, out
    assert 'Revealed type is "int"' in out, out
    assert 'def (*args: Any, **kwargs: Any) -> widgetbind.widgets._widget_lazy.widget_args' in out
    assert 'Module has no attribute "WIDGET_MAGC"' in out, out
    assert 'Module has no attribute "WIDGET_MODE_FSAT"' in out, out
    assert "Found 2 errors" in out, out


def test_jedi_completes_and_jumps_to_definitions(project: Path) -> None:
    jedi = pytest.importorskip("jedi", reason="jedi is in the test extra (pip install -e .[test])")
    src = project / "src"
    code = "from widgetbind.widgets import widget_lazy\nwidget_lazy.WIDGET_MAGIC\n"
    script = jedi.Script(code, path=str(src / "probe.py"),
                         project=jedi.Project(str(src), added_sys_path=[str(src)]))
    names = {c.name for c in script.complete(2, len("widget_lazy.WIDGET_M"))}
    assert names == {"WIDGET_MAGIC", "WIDGET_MODE_FAST"}, names
    (d,) = script.goto(2, len("widget_lazy.WIDGET_MA"), follow_imports=True)
    assert d.module_path.name == "_widget_lazy.py" and d.line > 1
    line = d.module_path.read_text().split("\n")[d.line - 1]
    assert line.startswith("WIDGET_MAGIC = 0x57")
    (t,) = script.infer(2, len("widget_lazy.WIDGET_MA"))
    assert t.full_name == "builtins.int"


def test_lazy_definitions_keep_their_file_and_line(project: Path) -> None:
    code = textwrap.dedent("""\
        import inspect, traceback
        from widgetbind.widgets import widget_lazy as w
        print(inspect.getsource(w.widget_args).split("\\n")[0])
        print(inspect.getsource(w.WIDGET_SCALE).split("\\n")[0])
        try:
            w.WIDGET_BIT(-1)
        except ValueError:
            f = traceback.extract_tb(__import__("sys").exc_info()[2])[-1]
            print(f.filename.rsplit("/", 1)[1], f.line)
    """)
    r = _run([sys.executable, "-c", code], project)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == [
        "class widget_args(_rt.Struct):",
        "def WIDGET_SCALE(x):",
        "_widget_lazy.py return _c_sext((1 << x), 32)",
    ], r.stdout
