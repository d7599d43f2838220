"""Tensor-core PTX (sm_80): mma.sync and ldmatrix."""
from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.drivers.mock.ptx.parse import Instr

if TYPE_CHECKING:
    from runtime.drivers.mock.ptx.execute import Kernel
    from runtime.drivers.mock.ptx.ops import Fn


def op_mma(k: "Kernel", ins: Instr) -> "Fn":
    from runtime.drivers.mock.ptx.ops import Unsupported
    raise Unsupported(ins.opcode)


def op_ldmatrix(k: "Kernel", ins: Instr) -> "Fn":
    from runtime.drivers.mock.ptx.ops import Unsupported
    raise Unsupported(ins.opcode)
