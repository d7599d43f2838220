"""The passes over the IR, in the one order they run (:data:`PIPELINE`).

Parsing (``bindgen.parse``) only converts: it lists the translation unit's declarations with their
facts and converts one to IR when asked (``bindgen.decls``), and reads the macros. Every decision a
spec or Python imposes is a pass here, a function in its own module that reads and writes what its
docstring says, given a :class:`Context`: ``select`` decides which declarations and macros the
target keeps (and converts only those), ``naming`` gives them their Python names, and the rest
translate macros, add records and tables, apply the spec's patches, check the namespace and order
the definitions. The renderer only reads the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .. import ir
from . import dedupe, enum_classes, macro_docs, macro_records, macros, naming, order, patches, select, tables

if TYPE_CHECKING:
    from ..parse import ParseResult
    from ..spec import Target


@dataclass
class Context:
    """What a pass reads (the target's spec, the parse result) and writes (``module``, and what
    one pass hands a later one)."""

    target: Target
    parsed: ParseResult
    module: ir.Module = field(init=False)
    kept_macros: frozenset[str] = frozenset()  # select → macros: the macros the target keeps
    record_names: dict[str, str] = field(default_factory=dict)  # naming → macros: C spelling → class

    def __post_init__(self) -> None:
        self.module = ir.Module(self.target.name)


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[Context], None]


PIPELINE: tuple[Pass, ...] = (
    Pass("select", select.select),  # the declarations and macros the target keeps
    Pass("naming", naming.name),  # Python names of declarations, fields and parameters
    Pass("macros", macros.translate),  # object- and function-like macros, ioctl requests
    Pass("macro_records", macro_records.build),  # records described by field macros
    Pass("tables", tables.add),  # X-macro tables as constants
    Pass("macro_docs", macro_docs.attach),  # header comments of the emitted macros
    Pass("patches", patches.apply),  # the spec's declarative patches
    Pass("enum_classes", enum_classes.mark),  # enums as IntEnum/IntFlag where the spec asks
    Pass("dedupe", dedupe.check),  # one Python namespace: clashes fail, enum copies go
    Pass("order", order.order),  # the definition order Python needs
)


def run_all(ctx: Context) -> None:
    """Runs every pass of :data:`PIPELINE`, in order, on ``ctx``."""
    for p in PIPELINE:
        p.run(ctx)
