"""The test helper's dispatch record (tests/runtime/rdna3_device.py, used where the driver cannot
express a launch: a GWS range, an instruction limit, a fault the test wants as it is) is the
dispatch the driver sends: for code objects of every kind, the record the mock GPU's PM4
processor decoded from a real launch equals the helper's, field by field, and the two
kernel-argument blocks hold the same bytes."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from .rdna3_device import DriverDevice
from .rdna3_util import reference

CLANG = Path(__file__).resolve().parent / "data" / "rdna3_real" / "clang"


def _launch(name: str):  # type: ignore[no-untyped-def]
    """(code object, kernel, args as (kind, size), grid, block, dynamic LDS)"""
    cases = {
        "reduce_sum (v4, LDS)": (reference("reduce_sum"), "reduce_sum", 2, (3, 1, 1),
                                 (64, 1, 1), 0),
        "vector_add_cov5 (v5 hidden args)": (reference("vector_add_cov5"), "vector_add", 3,
                                             (4, 1, 1), (64, 1, 1), 0),
        "private_array (scratch)": ((CLANG / "private_array_O0.hsaco").read_bytes(),
                                    "private_array", 2, (2, 1, 1), (64, 1, 1), 0),
        "dyn_lds wave64 (dynamic LDS)": ((CLANG / "dyn_lds_w64_O2.hsaco").read_bytes(),
                                         "dyn_lds", 2, (2, 1, 1), (128, 1, 1), 512),
        "index_3d": ((CLANG / "index_3d_O2.hsaco").read_bytes(), "index_3d", 1, (2, 3, 2),
                     (4, 2, 4), 0),
    }
    return cases[name]


NAMES = ["reduce_sum (v4, LDS)", "vector_add_cov5 (v5 hidden args)", "private_array (scratch)",
         "dyn_lds wave64 (dynamic LDS)", "index_3d"]


@pytest.mark.parametrize("name", NAMES)
def test_helper_record_is_the_dispatch_the_driver_sends(name):
    co, kernel, n_bufs, grid, block, dyn = _launch(name)
    dev = DriverDevice()
    try:
        prg = dev.d.program(co, kernel, dynamic_lds_B=dyn)
        bufs = [dev.upload(np.zeros(4096, np.float32)) for _ in range(n_bufs)]
        args = bufs + [0] * (len(prg.slots) - n_bufs)   # a count or an LDS offset: 0
        dev.launch(prg, args, grid, block)
        sent = dev.gpu.dispatches[-1].record
        made = dev.dispatch_record(prg, args, grid, block)
        kernarg = [slot for slot, extra in prg.user_data_pointers if extra == 0]
        assert kernarg, "the kernel reads a kernel-argument pointer"

        def base(rec) -> int:  # type: ignore[no-untyped-def]
            return rec.user_sgprs[kernarg[0]] | rec.user_sgprs[kernarg[0] + 1] << 32
        sent_ka, made_ka = base(sent), base(made)
        assert made.user_sgprs == tuple(prg.user_data(made_ka)) + \
            (0,) * (len(sent.user_sgprs) - len(prg.user_data(made_ka)))
        assert replace(made, user_sgprs=sent.user_sgprs) == sent
        size = max(prg.kernarg_B, 1)
        assert dev.mem.read(made_ka, size) == dev.mem.read(sent_ka, size)
    finally:
        dev.close()
