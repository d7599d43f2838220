"""Float helpers of the interpreter: fused multiply-add, the division helpers, class tests."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from runtime.drivers.mock.rdna3 import fp

from .test_rdna3_kernels import round_f32

f32, f64 = np.float32, np.float64


@pytest.fixture(autouse=True)
def _quiet_numpy():
    # The executor runs these helpers under np.errstate(all="ignore"); so do the tests.
    with np.errstate(all="ignore"):
        yield


def _exact_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = []
    for x, y, z in zip(a.tolist(), b.tolist(), c.tolist()):
        q = Fraction(x) * Fraction(y) + Fraction(z)
        out.append(round_f32(q) if q != 0 else (x * y + z))
    return np.array(out, dtype=f32)


def test_fma32_is_correctly_rounded_on_hard_cases():
    rng = np.random.default_rng(0)
    n = 4000
    a = rng.standard_normal(n).astype(f32)
    b = rng.standard_normal(n).astype(f32)
    # c cancels most of a*b or sits just off a rounding midpoint of it: where double rounding
    # through f64 would go wrong.
    p = a.astype(f64) * b
    c = np.empty(n, f32)
    c[:1000] = (-p[:1000]).astype(f32)
    c[1000:2000] = (np.ldexp(np.ones(1000), -60) * np.sign(rng.standard_normal(1000))).astype(f32)
    c[2000:3000] = np.float32(1e-40) * rng.integers(-3, 4, 1000)      # denormal addends
    c[3000:] = rng.standard_normal(1000).astype(f32) * f32(1e-30)
    # Products that land exactly on an f32 midpoint: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24.
    a[:50], b[:50] = f32(1 + 2**-12), f32(1 + 2**-12)
    c[:25], c[25:50] = f32(1e-40), f32(-1e-40)
    got = fp.fma32(a, b, c)
    np.testing.assert_array_equal(got, _exact_fma(a, b, c))
    # Plain f64 evaluation really is wrong on some of these (the test has teeth).
    assert (p.__add__(c).astype(f32) != got).any()


def test_fma32_pow2_matches_exact_fma_on_edges():
    """fma32_pow2 (v_fmac with an inline ±0.5/±1/±2/±4) against exact rationals: ordinary lanes,
    midpoint sums, lanes whose x*0.5 leaves the normal range (denormal and min-normal x, zero),
    and products that overflow f32 but come back into range with c."""
    rng = np.random.default_rng(1)
    n = 3000
    x = rng.standard_normal(n).astype(f32) * f32(1e3)
    c = rng.standard_normal(n).astype(f32)
    # x * 0.5 + c exactly halfway between two f32s: c = 1, x = 2^-23 (x/2 = half an ulp of 1).
    x[:20], c[:20] = f32(2.0 ** -23), f32(1.0)
    x[20:40], c[20:40] = f32(3 * 2.0 ** -23), f32(1.0)
    # Denormal and min-normal x with odd mantissas: x * 0.5 is not an f32.
    x[40:80] = (np.arange(40, dtype=np.uint32) * 2 + np.uint32(0x00800001)).view(f32)
    x[80:120] = (np.arange(40, dtype=np.uint32) * 2 + np.uint32(1)).view(f32)
    c[40:120] = (rng.integers(-5, 5, 80).astype(np.uint32) & np.uint32(0x807FFFFF)).view(f32)
    x[120:130] = f32(0.0)
    x[130:140] = f32(3e38)
    c[130:140] = f32(-3e38)
    for k in (0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0):
        kk = np.array(k, dtype=f32)
        got = fp.fma32_pow2(x, kk, c)
        np.testing.assert_array_equal(got.view(np.uint32),
                                      _exact_fma(x, np.full_like(x, kk), c).view(np.uint32))
        out = c.copy()
        fp.fma32_pow2(x, kk, out, out=out)   # in place, as v_fmac computes into its VGPR
        np.testing.assert_array_equal(out.view(np.uint32), got.view(np.uint32))
    # The guards fire where they must: 0.5 * (odd denormal) is not exact, 2 * 3e38 overflows.
    assert not fp.scaled_exactly(x[80:81], 0.5) and not fp.scaled_exactly(x[130:131], 2.0)
    assert fp.scaled_exactly(np.array([1.0, -3.5, 0.0, -0.0], f32), 0.5)
    assert not fp.scaled_exactly(np.array([0.0, 2.0 ** -126 * (1 + 2.0 ** -23)], f32), 0.5)


def test_fma32_redoes_only_inexact_midpoints():
    """A sum on an f32 midpoint that f64 holds exactly needs no fix (f32(s) is correctly
    rounded); one that f64 rounded does (the round-to-odd path). Both against exact rationals,
    in full arrays, 0-d operands and broadcast [n, 1] ones."""
    a = np.array([1 + 2**-12, 1.0, 1 + 2**-12, 3.0], f32)
    b = np.array([1 + 2**-12, 2.0**-24, 1 + 2**-12, 2.0**-30], f32)
    c = np.array([1e-40, 1.0, -1e-40, 1.0], f32)
    want = _exact_fma(a, b, c)
    np.testing.assert_array_equal(fp.fma32(a, b, c), want)
    for i in range(4):
        got = fp.fma32(a[i:i + 1].reshape(()), b[i:i + 1].reshape(()), c[i:i + 1].reshape(()))
        assert np.asarray(got).view(np.uint32) == want[i:i + 1].view(np.uint32)[0]
    got = fp.fma32(a[:, None], np.full((4, 3), b[:, None]), c[:, None])
    np.testing.assert_array_equal(got, np.repeat(want[:, None], 3, axis=1))


def _llvm_fdiv32(n: np.ndarray, d: np.ndarray) -> np.ndarray:
    """LLVM's correctly rounded f32 division (AMDGPU lowerFDIV32) on the interpreter's helpers."""
    den, _ = fp.div_scale(d, d, n)
    num, vcc = fp.div_scale(n, d, n)
    rcp = (f32(1) / den).astype(f32)
    neg = -den
    e0 = fp.fma32(neg, rcp, np.full_like(rcp, 1))
    r1 = fp.fma32(e0, rcp, rcp)
    q = (num * r1).astype(f32)
    e1 = fp.fma32(neg, q, num)
    q1 = fp.fma32(e1, r1, q)
    e2 = fp.fma32(neg, q1, num)
    return fp.div_fixup(fp.div_fmas(e2, r1, q1, vcc), d, n)


def test_division_sequence_is_correctly_rounded():
    rng = np.random.default_rng(2)
    n = rng.standard_normal(3000).astype(f32) * f32(100)
    d = rng.standard_normal(3000).astype(f32)
    d[:200] = f32(3e-39) * rng.integers(1, 9, 200)      # denormal divisors
    n[200:400] = f32(3e38) * np.sign(n[200:400])           # huge quotients
    d[200:400] = f32(1e-3)
    n[400:600] = f32(1e-38)                                # tiny quotients
    d[400:600] = f32(3e3)
    n[600:610] = [0, 0, np.inf, -np.inf, np.nan, 1, -1, 0, 5, np.inf]
    d[600:610] = [0, 1, 1, np.inf, 1, 0, -0.0, -2, np.inf, 0]
    with np.errstate(all="ignore"):
        want = n / d
    np.testing.assert_array_equal(_llvm_fdiv32(n, d), want)


def test_classify_and_conversions():
    v = np.array([np.nan, -np.inf, -1.5, -1e-40, -0.0, 0.0, 1e-40, 2.0, np.inf], f32)
    for bit in range(1, 10):
        mask = np.uint32(1 << bit)
        assert fp.classify(v, mask).tolist() == [i == bit - 1 for i in range(9)]
    got = fp.cvt_int(np.array([np.nan, 1e10, -1e10, -2.7, 2.7], f32), np.int32, -2**31, 2**31 - 1)
    assert got.tolist() == [0, 2**31 - 1, -2**31, -2, 2]
    assert fp.fract(np.array([-0.25, np.inf, 3.0], f32)).tolist()[0] == 0.75


def test_min_max_follow_ieee_mode():
    snan = np.array([0x7F800001], np.uint32).view(f32)[0]
    a = np.array([0.0, -0.0, np.nan, 1.0, snan, 2.0], f32)
    b = np.array([-0.0, 0.0, 1.0, np.nan, 1.0, snan], f32)
    lo, hi = fp.fmin(a, b), fp.fmax(a, b)
    assert np.signbit(lo[:2]).all() and not np.signbit(hi[:2]).any()   # -0 < +0
    assert lo[2] == 1.0 and lo[3] == 1.0 and hi[2] == 1.0               # quiet NaN: the other
    assert np.isnan(lo[4:]).all() and np.isnan(hi[4:]).all()            # signalling NaN wins,
    assert (lo[4:].view(np.uint32) & 0x00400000).all()                  # quieted
