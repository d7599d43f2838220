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
