"""Comments read on their own: the source cites no guide section, no issue number and no document
outside the repository (a reader has only the repository and public sources)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("runtime", "bindgen", "bindgen_rt", "scripts", "tools", "tests")
SUFFIXES = {".py", ".c", ".sh", ".yaml"}
# What a comment must not lean on: this project's guides and issue tracker.
FORBIDDEN = re.compile(r"guide,? section|style guide|the guide's|shared/guides|\bissues? #?\d+",
                       re.IGNORECASE)


def test_no_comment_cites_a_guide_or_an_issue() -> None:
    hits = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file() or path == Path(__file__):
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                if FORBIDDEN.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "cite the public source instead:\n" + "\n".join(hits)


# A measured time in a comment is stale as soon as the code or the machine changes: the bench
# scripts and docs/benchmarks.md hold timings. The generator and its runtime are held to that.
TIMED_FOLDERS = ("bindgen", "bindgen_rt")
TIMING = re.compile(r"\d(?:\s?-\s?[\d.]+)?\s?(?:ms|µs|us|ns|s)\b")


def _comments_and_docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring line of a Python file."""
    import ast
    import io
    import tokenize

    text = path.read_text()
    out = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            first = body[0].lineno
            out += [(first + i, ln) for i, ln in enumerate(body[0].value.value.splitlines())]
    return out


def test_no_comment_in_the_generator_carries_a_timing() -> None:
    hits = []
    for folder in TIMED_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for n, line in _comments_and_docstrings(path):
                if TIMING.search(line):
                    hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "say why without the measurement (bench figures go in docs):\n" + "\n".join(
        hits
    )


def test_the_timing_check_sees_comments_and_docstrings(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text('"""Costs 0.1 ms."""\nx = "2 s"  # about 80 µs\ndef f():\n    """Fine."""\n')
    found = [ln for _, ln in _comments_and_docstrings(src) if TIMING.search(ln)]
    assert found == ["# about 80 µs", "Costs 0.1 ms."]
