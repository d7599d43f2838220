"""NVIDIA RM status codes: names and messages.

Both come from the generated bindings: `NV_STATUS_CODE_TABLE` holds the rows of nvstatuscodes.h's
`NV_STATUS_CODE(name, code, string)` list (an X-macro table rule in bindgen/specs/nv.yaml), so the
names, values and messages match the driver branch the bindings were generated for.
"""
from __future__ import annotations

from functools import lru_cache

from hcq_bindings.nv import rm_580 as rm


@lru_cache(maxsize=1)
def _table() -> dict[int, tuple[str, str]]:
    """Status value -> (name, message); the first name listed for a value wins."""
    out: dict[int, tuple[str, str]] = {}
    for name, code, message in rm.NV_STATUS_CODE_TABLE:
        out.setdefault(code, (name, message))
    return out


def status_name(status: int) -> str:
    """"NV_ERR_INVALID_ARGUMENT" for 0x1f; "NV_STATUS_0x..." for a value no header names."""
    return _table().get(status, (f"NV_STATUS_{status:#010x}", ""))[0]


def status_message(status: int) -> str:
    """The header's message for `status` ("Invalid argument"), or "" when it has none."""
    return _table().get(status, ("", ""))[1]


def describe_status(status: int) -> str:
    """"NV_ERR_INVALID_ARGUMENT (0x1f): Invalid argument"."""
    msg = status_message(status)
    return f"{status_name(status)} ({status:#x})" + (f": {msg}" if msg else "")
