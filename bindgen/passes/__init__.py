"""The passes over the IR, in the one order they run (:data:`PIPELINE`).

Parsing (``bindgen.parse``) already did two jobs while walking clang's cursors: **selection** (which
declarations the target keeps: its files and name rules, plus everything a kept declaration needs)
and **naming** (Python names for anonymous records and members, keyword renames). Everything after
that is a pass here: a function in its own module, reading and writing what its docstring says,
given a :class:`Context`. The renderer only reads the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .. import ir
from . import dedupe, macro_docs, macro_records, macros, order, patches, tables

if TYPE_CHECKING:
    from ..parse import ParseResult
    from ..spec import Target


@dataclass
class Context:
    """What a pass reads (the target's spec, the parse result) and changes (``module``)."""

    target: Target
    parsed: ParseResult

    @property
    def module(self) -> ir.Module:
        return self.parsed.module


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Context], None]


PIPELINE: tuple[Pass, ...] = (
    Pass("macros", macros.translate),  # object- and function-like macros, ioctl requests
    Pass("macro_records", macro_records.build),  # records described by field macros
    Pass("tables", tables.add),  # X-macro tables as constants
    Pass("macro_docs", macro_docs.attach),  # header comments of the emitted macros
    Pass("patches", patches.apply),  # the spec's declarative patches
    Pass("dedupe", dedupe.check),  # one Python namespace: clashes fail, enum copies go
    Pass("order", order.order),  # the definition order Python needs
)


def run_all(ctx: Context) -> None:
    """Runs every pass of :data:`PIPELINE`, in order, on ``ctx``."""
    for p in PIPELINE:
        p.run(ctx)
