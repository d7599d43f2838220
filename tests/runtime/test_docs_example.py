"""docs/runtime.md's tensor-engine example runs as written (on the mock AMD GPU)."""
from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _example() -> str:
    text = (REPO / "docs" / "runtime.md").read_text()
    m = re.search(r"<!-- example: tensor-engine -->\n```python\n(.*?)```", text, re.S)
    assert m, "docs/runtime.md lost its tensor-engine example"
    return m.group(1)


def test_the_tensor_engine_example_runs() -> None:
    cwd = os.getcwd()
    os.chdir(REPO)  # the example names the committed kernels relative to the checkout
    try:
        ns: dict[str, object] = {}
        exec(compile(_example(), "docs/runtime.md", "exec"), ns)  # noqa: S102
    finally:
        os.chdir(cwd)
    assert ns["seconds"] is not None and ns["pending"].done()  # type: ignore[attr-defined]
