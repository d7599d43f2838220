"""Golden tests: the complete module text bindgen writes for small headers.

Each header in ``golden/cases`` is one target (options from its first line,
``// bindgen-target: {JSON}``, as spec keys); what bindgen writes for it is committed under
``golden/expected`` (``NAME.py``; a lazy target adds ``_NAME.py``). Fingerprint lines are
compared with their hashes blanked, so a generator change alone does not touch the expectations;
any change of the text does. To accept new output after a deliberate change:

    BINDGEN_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/bindgen/test_golden.py

and review the diff of ``tests/bindgen/golden/expected`` like any code change.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from .conftest import generate_headers

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted((GOLDEN / "cases").glob("*.h"))
UPDATE = os.environ.get("BINDGEN_UPDATE_GOLDEN") == "1"


def _blank(text: str) -> str:
    text = re.sub(r"^# fingerprint: \w+$", "# fingerprint: <hash>", text, flags=re.M)
    text = re.sub(r"^(_LAZY = _LazyModule\(.*, )'[0-9a-f]{32}'\)$", r"\1'<hash>')", text,
                  flags=re.M)
    return re.sub(r"^# inputs: \w+  headers: \w+$", "# inputs: <hash>  headers: <hash>", text,
                  flags=re.M)


def _options(header: Path) -> dict:
    first = header.read_text().split("\n", 1)[0]
    m = re.fullmatch(r"// bindgen-target: (\{.*\})", first)
    assert m, f"{header.name}: the first line must be // bindgen-target: {{JSON options}}"
    return json.loads(m.group(1))


@pytest.mark.parametrize("header", CASES, ids=[h.stem for h in CASES])
def test_module_text(header: Path, tmp_path: Path) -> None:
    g, mod = generate_headers(
        tmp_path, [header.name], name=header.stem, source_dir=header.parent, **_options(header)
    )
    got = {f"{header.stem}.py": _blank(g.text)}
    if g.defs is not None:
        got[f"_{header.stem}.py"] = _blank(g.defs)
    for name, text in got.items():
        want = GOLDEN / "expected" / name
        if UPDATE:
            want.write_text(text)
            continue
        assert want.exists(), f"{want} is missing: run with BINDGEN_UPDATE_GOLDEN=1 to write it"
        assert text == want.read_text(), (
            f"{name} differs from {want.relative_to(GOLDEN.parent)}; if the change is meant, "
            f"rerun with BINDGEN_UPDATE_GOLDEN=1 and review the diff"
        )


def test_every_expectation_has_its_case() -> None:
    stems = {h.stem for h in CASES}
    stray = [p.name for p in (GOLDEN / "expected").glob("*.py")
             if p.stem.lstrip("_") not in stems]
    assert not stray, f"expectations without a case in golden/cases: {stray}"
