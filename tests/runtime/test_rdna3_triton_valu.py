"""Triton 3.6's reductions and tl.dot on the mock GPU: the committed code objects of
tests/runtime/data/rdna3_real/triton (built by build.py there) whose wave-level steps are DPP
(quad_perm, row_shr/row_mirror/... with bound_ctrl and bank masks), v_permlanex16_b32 and, for
tl.dot on fp16, v_wmma_f32_16x16x16_f16. Each runs through the AMD runtime on the mock and is
compared with numpy: exactly for max/argmax, within stated rounding bounds for sums.
"""
from __future__ import annotations

import numpy as np
import pytest

from runtime.drivers.amd import elf
from runtime.drivers.mock.rdna3.audit import audit
from runtime.drivers.mock.rdna3.decode import DPP8, DPP8FI, DPP16, decode_all

from .test_rdna3_real import TRITON, Runner, ulp_error

f32, i32 = np.float32, np.int32
EPS = float(np.finfo(f32).eps)
KERNELS = ["softmax", "layer_norm", "row_sum", "row_argmax", "matmul_f16"]


@pytest.fixture
def run():  # type: ignore[no-untyped-def]
    r = Runner()
    yield r
    r.close()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(11)


def _names(kernel: str) -> list[str]:
    """Mnemonics of a kernel's instructions, `<name>+dpp` for those with a DPP source."""
    co = elf.parse((TRITON / f"{kernel}.hsaco").read_bytes())
    text = co.section(".text")
    insts = decode_all(co.section_bytes(".text"), text.addr)
    return [i.name + ("+dpp" if i.f.get("src0") in (DPP16, DPP8, DPP8FI) else "")
            for i in insts]


@pytest.mark.parametrize("kernel", KERNELS)
def test_audit_and_the_cross_lane_instructions_they_use(kernel):
    assert audit((TRITON / f"{kernel}.hsaco").read_bytes()) == []
    names = _names(kernel)
    if kernel == "matmul_f16":
        assert "v_wmma_f32_16x16x16_f16" in names
    else:   # a reduction: DPP steps inside rows, then permlanex16 across them
        assert any(n.endswith("+dpp") for n in names), kernel
        assert "v_permlanex16_b32" in names, kernel


def test_row_sum(run, rng):
    rows, n = 7, 450    # BLOCK 512: the tail is masked to 0.0
    x = rng.standard_normal((rows, n)).astype(f32)
    out = run.put(np.zeros(rows, f32))
    run.triton("row_sum", [run.put(x), out, n, n], (rows,))
    want = x.astype(np.float64).sum(1)
    # n additions in the kernel's tree order: each rounds by at most eps/2 of a partial sum
    # bounded by sum |x|.
    bound = n * EPS * np.abs(x).astype(np.float64).sum(1)
    assert np.all(np.abs(run.get(out, rows, f32) - want) <= bound)


def test_row_argmax_returns_the_first_index_of_the_maximum(run, rng):
    rows, n = 6, 200
    x = rng.standard_normal((rows, n)).astype(f32)
    x[2, 17] = x[2, 40] = x[2, 199] = 9.0     # ties: tl.max(return_indices) takes the first
    x[4, :] = -3.0
    x[5, 130] = np.inf
    vals, idx = run.put(np.zeros(rows, f32)), run.put(np.zeros(rows, i32))
    run.triton("row_argmax", [run.put(x), vals, idx, n, n], (rows,))
    np.testing.assert_array_equal(run.get(idx, rows, i32), x.argmax(1))
    np.testing.assert_array_equal(run.get(vals, rows, f32), x.max(1))


def test_softmax(run, rng):
    rows, n = 6, 200
    x = (rng.standard_normal((rows, n)) * 4).astype(f32)
    x[1, :5] = -np.inf       # exp(-inf) = 0 in the sum and the output
    out = run.put(np.zeros(rows * n, f32))
    run.triton("softmax", [out, run.put(x), n, n, n], (rows,))
    got = run.get(out, rows * n, f32).reshape(rows, n)
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    np.testing.assert_array_equal(got[1, :5], 0.0)
    ok = want > 0
    # exp through v_exp_f32 (exp2 of x·log2 e, one rounding of the scaled argument: |x| ≤ ~30
    # here, so ~30 ulp of relative error), the row sum (n ulp) and a division: within 64 + n ulp.
    assert ulp_error(got[ok], want[ok]) <= 64 + n


def test_layer_norm(run, rng):
    rows, n = 5, 200    # BLOCK 256
    x = (rng.standard_normal((rows, n)) * 3 + 1).astype(f32)
    w = rng.standard_normal(n).astype(f32)
    b = rng.standard_normal(n).astype(f32)
    y = run.put(np.zeros(rows * n, f32))
    run.triton("layer_norm", [run.put(x), y, run.put(w), run.put(b), n, n, f32(1e-5)], (rows,))
    got = run.get(y, rows * n, f32).reshape(rows, n)
    xd = x.astype(np.float64)
    mean = xd.mean(1, keepdims=True)
    var = ((xd - mean) ** 2).mean(1, keepdims=True)
    want = (xd - mean) / np.sqrt(var + 1e-5) * w + b
    # mean and variance are n-term f32 sums (relative error n·eps of their magnitude), then a
    # reciprocal square root and two fused multiply-adds: |error| ≤ 4n·eps·(|x - mean|·rstd·|w|
    # + |b|) plus a few ulp.
    scale = np.abs((xd - mean) / np.sqrt(var + 1e-5) * w) + np.abs(b)
    assert np.all(np.abs(got - want) <= 4 * n * EPS * scale + 4 * EPS * np.abs(want))


def test_matmul_f16_through_wmma(run, rng):
    m, n, k = 48, 40, 56   # 32x32x32 tiles: the edges are masked
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = run.put(np.zeros(m * n, f32))
    run.triton("matmul_f16", [run.put(a), run.put(b), c, m, n, k, k, 1, n, 1, n, 1],
               (-(-m // 32), -(-n // 32)))
    want = a.astype(np.float64) @ b.astype(np.float64)
    got = run.get(c, m * n, f32).reshape(m, n)
    # f16 products are exact in f32; the accumulator rounds once per WMMA step (k/16 steps).
    bound = (k // 16 + 1) * EPS * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(got - want) <= bound)
