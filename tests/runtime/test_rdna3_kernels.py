"""Real gfx1100 kernels on the RDNA3 interpreter, each checked against numpy.

Kernels come from tests/runtime/kernels_amd/*.cl (compiled here with clang-16/ld.lld-16) and from
the prebuilt reference code objects in tests/runtime/data/amd_reference. Every test runs through
the AMD driver on the mock GPU (AMDDevice("mock-amd:0"): code object loading, kernel arguments,
PM4 SET_SH_REG/DISPATCH_DIRECT, the mock's PM4 processor decoding the dispatch), so the runtime
side (user SGPRs, LDS size, hidden arguments) is checked against the same numpy results.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from .rdna3_device import DriverDevice
from .rdna3_util import compiled, needs_compiler, reference

f32, f64, i32, u32 = np.float32, np.float64, np.int32, np.uint32


@pytest.fixture
def dev():  # type: ignore[no-untyped-def]
    d = DriverDevice()
    yield d
    d.close()


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def round_f32(q: Fraction) -> float:
    """An exact rational rounded to the nearest f32 (ties to even), as a Python float."""
    if q == 0:
        return 0.0
    neg, q = q < 0, abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length() - 24
    while q >= Fraction(2) ** (e + 24):
        e += 1
    while q < Fraction(2) ** (e + 23):
        e -= 1
    e = max(e, -149)                       # f32 denormals have a fixed quantum of 2^-149
    m = q / Fraction(2) ** e
    whole, rest = divmod(m.numerator, m.denominator)
    if 2 * rest > m.denominator or 2 * rest == m.denominator and whole & 1:
        whole += 1
    val = float(whole) * 2.0 ** e if e + whole.bit_length() <= 128 else float("inf")
    return -val if neg else val


def fma_ref(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Correctly rounded f32 fma, from exact rational arithmetic (f64 for non-finite inputs)."""
    a, b, c = np.broadcast_arrays(a, b, c)
    out = (a.astype(f64) * b + c).astype(f32)
    for i in np.flatnonzero(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)):
        x, y, z = (Fraction(float(v.flat[i])) for v in (a, b, c))
        out.flat[i] = round_f32(x * y + z) if x * y + z != 0 else out.flat[i]
    return out


def groups(n: int, block: int) -> int:
    return -(-n // block)


# -- our kernels ---------------------------------------------------------------------------------
@needs_compiler
def test_vadd_f32(dev, rng):
    n = 8192
    a, b = rng.standard_normal(n).astype(f32), rng.standard_normal(n).astype(f32)
    k = dev.load(compiled("vadd_f32"))
    va, vb, vc = dev.upload(a), dev.upload(b), dev.alloc(4 * n)
    st = dev.launch(k, [va, vb, vc], (n // 256,), (256,))
    np.testing.assert_array_equal(dev.download(vc, n, f32), a + b)
    assert st.waves == n // 32 and st.workgroups == n // 256
    assert st.lane_instructions == 32 * st.wave_instructions  # no divergence


@needs_compiler
def test_vadd_i32_wraps(dev, rng):
    n = 4096
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(i32)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64).astype(i32)
    k = dev.load(compiled("vadd_i32"))
    outs = [dev.alloc(4 * n) for _ in range(3)]
    dev.launch(k, [dev.upload(a), dev.upload(b), *outs], (n // 128,), (128,))
    wide_a, wide_b = a.astype(np.int64), b.astype(np.int64)
    for va, want in zip(outs, (wide_a + wide_b, wide_a - wide_b, wide_a * wide_b)):
        np.testing.assert_array_equal(dev.download(va, n, i32), want.astype(i32))


@needs_compiler
@pytest.mark.parametrize("stride", [1, 3])
def test_saxpy_scalar_args(dev, rng, stride):
    n = 1000
    x = rng.standard_normal(n * stride).astype(f32)
    y = rng.standard_normal(n * stride + 64).astype(f32)
    alpha = f32(-1.75)
    k = dev.load(compiled("saxpy_n"))
    vx, vy = dev.upload(x), dev.upload(y)
    dev.launch(k, [alpha, vx, vy, n, stride], (groups(n, 64),), (64,))
    got = dev.download(vy, len(y), f32)
    want = y.copy()
    idx = np.arange(n) * stride
    want[idx] = fma_ref(np.full(n, alpha), x[idx], y[idx])
    np.testing.assert_array_equal(got, want)


@needs_compiler
def test_index_2d(dev, rng):
    w, h = 37, 29
    src = rng.standard_normal((w, h)).astype(f32)          # in[x * h + y]
    k = dev.load(compiled("index_2d"))
    vo = dev.alloc(4 * w * h)
    dev.launch(k, [dev.upload(src), vo, w, h], (groups(w, 16), groups(h, 8)), (16, 8))
    ys, xs = np.mgrid[0:h, 0:w]
    want = (src.T + f32(1000) * ys.astype(f32)) + xs.astype(f32)
    np.testing.assert_array_equal(dev.download(vo, w * h, f32).reshape(h, w), want)


@needs_compiler
def test_index_3d(dev):
    grid, block = (3, 2, 2), (8, 4, 2)
    nx, ny, nz = (g * b for g, b in zip(grid, block))
    k = dev.load(compiled("index_3d"))
    vo = dev.alloc(16 * nx * ny * nz)
    st = dev.launch(k, [vo, nx, ny], grid, block)
    got = dev.download(vo, 4 * nx * ny * nz, u32).reshape(nz, ny, nx, 4)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    pack = lambda a, b, c: (a | (b << 10) | (c << 20)).astype(u32)  # noqa: E731
    np.testing.assert_array_equal(got[..., 0], pack(x, y, z))
    np.testing.assert_array_equal(got[..., 1], pack(x % 8, y % 4, z % 2))
    np.testing.assert_array_equal(got[..., 2], pack(x // 8, y // 4, z // 2))
    assert (got[..., 3] == (8 | 4 << 10 | 2 << 20)).all()
    assert st.waves == 12 * 2  # 64-thread workgroups are two waves


@needs_compiler
def test_reduce_lds_barriers(dev, rng):
    n = 256 * 48 - 100  # the last workgroup is partly out of range
    x = rng.standard_normal(n).astype(f32)
    k = dev.load(compiled("reduce_lds"))
    ng = groups(n, 256)
    vs, vm = dev.alloc(4 * ng), dev.alloc(4 * ng)
    dev.launch(k, [dev.upload(x), vs, vm, n], (ng,), (256,))
    padded = np.concatenate([x, np.zeros(ng * 256 - n, f32)]).reshape(ng, 256)
    np.testing.assert_allclose(dev.download(vs, ng, f32), padded.sum(1, dtype=f64), rtol=1e-5,
                               atol=1e-5)
    maxes = np.concatenate([x, np.full(ng * 256 - n, -np.inf, f32)]).reshape(ng, 256).max(1)
    np.testing.assert_array_equal(dev.download(vm, ng, f32), maxes)


def _branches_ref(v: np.ndarray) -> np.ndarray:
    out = []
    for x in v.tolist():
        if x < 0:
            out.append(-1)
        elif x % 3 == 0:
            r = x // 3
            out.append(r * 7 if r & 1 else r + 11)
        elif x % 3 == 1:
            out.append(sum(k * x for k in range(x & 15)))
        else:
            r = x
            while r > 10:
                r = r // 2 + (r & 1)
            out.append(r)
    return np.array(out, dtype=np.int64).astype(i32)


@needs_compiler
def test_branches_divergent_lanes(dev, rng):
    n = 2048
    v = rng.integers(-20, 5000, n).astype(i32)
    k = dev.load(compiled("branches"))
    vo = dev.alloc(4 * n)
    st = dev.launch(k, [dev.upload(v), vo], (n // 64,), (64,))
    np.testing.assert_array_equal(dev.download(vo, n, i32), _branches_ref(v))
    assert st.lane_instructions < 32 * st.wave_instructions  # lanes were masked off


def _c_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    q = np.abs(x) // np.abs(y)
    return np.where((x < 0) ^ (y < 0), -q, q)


@needs_compiler
def test_int_division_and_shifts(dev, rng):
    n = 2048
    a = rng.integers(-2**31, 2**31, n, dtype=np.int64)
    b = rng.integers(-2**31, 2**31, n, dtype=np.int64)
    b[: n // 4] = rng.integers(-40, 40, n // 4)        # small divisors and shift counts too
    a[n // 4: n // 2] = rng.integers(-1000, 1000, n // 4)
    b[b == 0] = 7
    b[(a == -2**31) & (b == -1)] = 3                   # C leaves INT_MIN / -1 undefined
    k = dev.load(compiled("int_divshift"))
    vo = dev.alloc(40 * n)
    dev.launch(k, [dev.upload(a.astype(i32)), dev.upload(b.astype(i32)), vo], (n // 256,), (256,))
    got = dev.download(vo, 10 * n, i32).reshape(n, 10).astype(np.int64)
    ua, ub = a & 0xFFFFFFFF, b & 0xFFFFFFFF
    q = _c_div(a, b)
    sh = b & 31
    want = [q, a - q * b, ua // ub, ua % ub, (a << sh), a >> sh, ua >> sh, (a * b) >> 32,
            np.minimum(a, b) ^ np.maximum(a, b),
            np.array([bin(v).count("1") for v in ua]) +
            np.array([32 - int(v).bit_length() for v in ub])]
    for col, w in enumerate(want):
        np.testing.assert_array_equal(got[:, col], w.astype(np.int64).astype(i32),
                                      err_msg=f"o[{col}]")


@needs_compiler
def test_float_math(dev, rng):
    n = 2048
    a = (rng.standard_normal(n) * 10).astype(f32)
    b = (rng.standard_normal(n) * 10).astype(f32)
    c = rng.standard_normal(n).astype(f32)
    a[:6] = [0.0, -0.0, np.inf, 3.0, -2.5, 1e-40]
    b[:6] = [5.0, 2.0, 1.0, np.inf, 0.0, 3.0]
    k = dev.load(compiled("float_math"))
    vo = dev.alloc(40 * n)
    dev.launch(k, [dev.upload(a), dev.upload(b), dev.upload(c), vo], (n // 128,), (128,))
    got = dev.download(vo, 10 * n, f32).reshape(n, 10)
    with np.errstate(all="ignore"):
        want = [a * b, a + b, fma_ref(a, b, c), np.fmin(a, b), np.fmax(a, b), a / b,
                np.sqrt(np.abs(a)), np.floor(a) + np.ceil(b), fma_ref(-b, c, a),
                np.trunc(a * f32(100)).astype(f32)]
    want[9][2] = 2.0 ** 31  # v_cvt_i32_f32 saturates: (int)inf is INT_MAX, 2^31 as a float
    for col, w in enumerate(want):
        np.testing.assert_array_equal(got[:, col], w, err_msg=f"o[{col}]")


@needs_compiler
def test_global_atomics(dev, rng):
    n = 4096
    v = rng.integers(0, 100000, n).astype(u32)
    k = dev.load(compiled("atomics"))
    counter, hist, slots = dev.alloc(8), dev.alloc(64), dev.alloc(4 * n)
    minmax = dev.upload(np.array([2**31 - 1, -2**31], dtype=i32))
    dev.launch(k, [dev.upload(v), counter, hist, minmax, slots], (n // 256,), (256,))
    assert dev.download(counter, 2, u32).tolist() == [n, n]
    np.testing.assert_array_equal(dev.download(hist, 16, u32), np.bincount(v & 15, minlength=16))
    assert dev.download(minmax, 2, i32).tolist() == [int(v.min()), int(v.max())]
    # atomic_inc hands every lane its own slot, so the slots hold a permutation of the input.
    np.testing.assert_array_equal(np.sort(dev.download(slots, n, u32)), np.sort(v))


@needs_compiler
def test_float_atomic_add_contended_cas_loop(dev, rng):
    """Every lane adds into one float through a compare-and-swap retry loop. Small integers keep
    the sum exact in any order. Waves racing on the address run one after another, so the work
    grows linearly with the lanes (each wave retries at most once per lane)."""
    n = 2048
    v = rng.integers(1, 8, n).astype(f32)
    k = dev.load(compiled("float_atomic_add"))
    s = dev.upload(np.zeros(1, f32))
    st = dev.launch(k, [s, dev.upload(v)], (n // 256,), (256,))
    assert dev.download(s, 1, f32)[0] == v.sum()
    # In lock step every wave would retry once per lane of the whole grid: about
    # n * n / 64 * 10 wave-instructions (650K here). One wave after another: each wave retries
    # at most 32 times, 13 n at -O2 and 24 n at -O0.
    assert st.wave_instructions < 40 * n


@needs_compiler
def test_private_array_in_scratch(dev, rng):
    """2 KiB of private array per lane: the runtime's scratch memory (TMPRING_SIZE and the
    dispatch scratch base) backs it."""
    n_wg, n = 4, 150
    x = rng.integers(-1000, 1000, 64 * n_wg).astype(i32)
    k = dev.load(compiled("private_array"))
    vo = dev.alloc(4 * len(x))
    dev.launch(k, [dev.upload(x), vo, n], (n_wg,), (64,))
    i = np.arange(len(x))[:, None]
    kk = (np.arange(n)[None, :] * 37 + i) & 511
    want = (x[:, None].astype(np.int64) * kk + (kk ^ i)).sum(axis=1)
    np.testing.assert_array_equal(dev.download(vo, len(x), i32), want.astype(i32))


@needs_compiler
def test_many_arguments(dev):
    n = 512
    a = np.arange(n, dtype=f32)
    b = (np.arange(n) % 7).astype(i32)
    d = (np.arange(n) * 0.25).astype(f32)
    k = dev.load(compiled("many_args"))
    vo = dev.alloc(4 * n)
    args = [vo, dev.upload(a), dev.upload(b), np.int8(-3), np.int16(1000), np.int32(-70000),
            np.uint32(3000000), np.int64(5 << 32), np.uint64(0x123456789), f32(2.0), f64(0.5),
            dev.upload(d), f32(4.0), np.int32(7)]
    dev.launch(k, args, (n // 64,), (64,))
    want = (a * 2 + b * -3.0 + 1000 - 70000 + 3000000) + (5 + 0x6789 + 0.5 + d * 4 + 7)
    np.testing.assert_array_equal(dev.download(vo, n, f32), want.astype(f32))


@needs_compiler
def test_grid_not_multiple_of_block(dev, rng):
    n, block = 1000, 128
    x = rng.standard_normal(n).astype(f32)
    k = dev.load(compiled("grid_tail"))
    sentinel = np.full(groups(n, block) * block + 32, 12345.0, f32)
    vo = dev.upload(sentinel)
    dev.launch(k, [dev.upload(x), vo, n], (groups(n, block),), (block,))
    got = dev.download(vo, len(sentinel), f32)
    np.testing.assert_array_equal(got[:n], fma_ref(x, np.full(n, f32(3)), np.full(n, f32(-1))))
    assert (got[n:] == 12345.0).all()


@needs_compiler
def test_lds_transpose_2d(dev, rng):
    w, h = 50, 37
    m = rng.standard_normal((h, w)).astype(f32)
    k = dev.load(compiled("lds_transpose"))
    vo = dev.alloc(4 * w * h)
    dev.launch(k, [dev.upload(m), vo, w, h], (groups(w, 16), groups(h, 16)), (16, 16))
    np.testing.assert_array_equal(dev.download(vo, w * h, f32).reshape(w, h), m.T)


@needs_compiler
def test_f64_math(dev, rng):
    n = 512
    a = rng.standard_normal(n) * 100
    b = rng.standard_normal(n) * 3
    k = dev.load(compiled("f64_math"))
    vo = dev.alloc(40 * n)
    dev.launch(k, [dev.upload(a), dev.upload(b), vo], (n // 64,), (64,))
    got = dev.download(vo, 5 * n, f64).reshape(n, 5)
    np.testing.assert_array_equal(got[:, 0], a + b)
    np.testing.assert_array_equal(got[:, 1], a * b)
    exact = [float(Fraction(x) * Fraction(y) + 1) for x, y in zip(a, b)]
    np.testing.assert_allclose(got[:, 2], exact, rtol=2.3e-16, atol=0)
    np.testing.assert_allclose(got[:, 3], a / b, rtol=2.3e-16, atol=0)
    np.testing.assert_allclose(got[:, 4], np.sqrt(np.abs(a)) + b.astype(f32), rtol=4.5e-16)


@needs_compiler
def test_subdword_memory_and_private_array(dev, rng):
    n = 1024
    c = rng.integers(0, 256, n).astype(np.uint8)
    s = rng.integers(-30000, 30000, n).astype(np.int16)
    k = dev.load(compiled("bytes_private"))
    o8, o16, op = dev.alloc(n), dev.alloc(2 * n), dev.alloc(4 * n)
    dev.launch(k, [dev.upload(c), dev.upload(s), o8, o16, op], (n // 64,), (64,))
    np.testing.assert_array_equal(dev.download(o8, n, np.uint8), (c.astype(int) * 3 + 1) & 0xFF)
    np.testing.assert_array_equal(dev.download(o16, n, np.int16),
                                  (s.astype(int) * -2).astype(np.int16))
    ci, si = c.astype(np.int64), s.astype(np.int64)
    want = (ci & 15) * ci + si + ((ci >> 4) & 15) * ci + si
    np.testing.assert_array_equal(dev.download(op, n, i32), want.astype(i32))


@needs_compiler
def test_partial_wave_workgroups(dev, rng):
    n_wg = 10
    v = rng.integers(-1000, 1000, 48 * n_wg).astype(i32)
    k = dev.load(compiled("partial_wave"))
    vo = dev.alloc(4 * len(v))
    st = dev.launch(k, [dev.upload(v), vo], (n_wg,), (48,))
    want = v.reshape(n_wg, 48)[:, ::-1] * 10 + 48
    np.testing.assert_array_equal(dev.download(vo, len(v), i32), want.reshape(-1))
    assert st.waves == 2 * n_wg
    assert st.lane_instructions == 48 * n_wg * (st.wave_instructions // st.waves)


# -- the prebuilt reference kernels -------------------------------------------------------------
@pytest.mark.parametrize("name,block", [("vector_add", 256), ("vector_add_cov5", 64)])
def test_reference_vector_add(dev, rng, name, block):
    n = 4096
    a, b = rng.standard_normal(n).astype(f32), rng.standard_normal(n).astype(f32)
    k = dev.load(reference(name))
    vc = dev.alloc(4 * n)
    dev.launch(k, [dev.upload(a), dev.upload(b), vc], (n // block,), (block,))
    np.testing.assert_array_equal(dev.download(vc, n, f32), a + b)


def test_reference_saxpy(dev, rng):
    n = 1000
    x, y = rng.standard_normal(n).astype(f32), rng.standard_normal(n + 24).astype(f32)
    k = dev.load(reference("saxpy"))
    vy = dev.upload(y)
    dev.launch(k, [f32(2.5), dev.upload(x), vy, n], (groups(n, 256),), (256,))
    want = y.copy()
    want[:n] = fma_ref(np.full(n, f32(2.5)), x, y[:n])
    np.testing.assert_array_equal(dev.download(vy, n + 24, f32), want)


def test_reference_reduce_sum(dev, rng):
    x = rng.standard_normal(64 * 40).astype(f32)
    k = dev.load(reference("reduce_sum"))
    vo = dev.alloc(4 * 40)
    dev.launch(k, [dev.upload(x), vo], (40,), (64,))
    np.testing.assert_allclose(dev.download(vo, 40, f32), x.reshape(40, 64).sum(1, dtype=f64),
                               rtol=1e-5, atol=1e-5)


def test_reference_int_branch(dev, rng):
    n, limit = 1024, 200
    v = rng.integers(-50, 3000, n).astype(i32)
    k = dev.load(reference("int_branch"))
    vo = dev.alloc(4 * n)
    dev.launch(k, [dev.upload(v), vo, limit], (n // 128,), (128,))
    want = []
    for i, x in enumerate(v.tolist()):
        s, vv = 0, x
        while vv > 1 and s < limit:
            vv = 3 * vv + 1 if vv & 1 else vv >> 1
            s += 1
        want.append(-s if x < 0 else s ^ (i & 7))
    np.testing.assert_array_equal(dev.download(vo, n, i32), want)


def test_reference_matrix_2d(dev, rng):
    w, h = 45, 23
    m = rng.standard_normal((h, w)).astype(f32)
    k = dev.load(reference("matrix_2d"))
    vo = dev.alloc(4 * w * h)
    dev.launch(k, [dev.upload(m), vo, w, h, f32(0.5)], (groups(w, 16), groups(h, 4)), (16, 4))
    np.testing.assert_array_equal(dev.download(vo, w * h, f32).reshape(w, h), m.T * f32(0.5))


def test_reference_float4_dual(dev, rng):
    n = 512
    a, b = rng.standard_normal((n, 4)).astype(f32), rng.standard_normal((n, 4)).astype(f32)
    k = dev.load(reference("float4_dual"))
    vo = dev.alloc(16 * n)
    dev.launch(k, [dev.upload(a), dev.upload(b), vo, f32(1.5), f32(-0.75)], (n // 64,), (64,))
    # The kernel computes b * t first, then fma(a, s, b * t) (v_dual_mul, v_dual_fmac).
    want = fma_ref(a, np.full_like(a, f32(1.5)), b * f32(-0.75))
    np.testing.assert_array_equal(dev.download(vo, 4 * n, f32).reshape(n, 4), want)


@needs_compiler
def test_scattered_masked_stores_unaligned_loads_and_two_barriers(dev, rng):
    n = 1000
    block = 128
    ng = groups(n, block)
    v = rng.integers(-1000, 1000, n).astype(i32)
    raw = rng.integers(0, 256, n + 8).astype(np.uint8)
    k = dev.load(compiled("scatter_masked"))
    out = dev.upload(np.full(n, -7, i32))
    out2, out3 = dev.alloc(4 * n), dev.alloc(4 * ng * block)
    dev.launch(k, [dev.upload(v), out, dev.upload(raw), out2, out3, n], (ng,), (block,))
    want = np.full(n, -7, i32)
    idx = np.arange(n)
    sel = idx % 3 != 0
    want[(idx[sel] * 7) % n] = v[sel] + 1
    np.testing.assert_array_equal(dev.download(out, n, i32), want)
    unaligned = np.array([int.from_bytes(raw[j + 1:j + 5].tobytes(), "little") for j in idx])
    np.testing.assert_array_equal(dev.download(out2, n, u32), unaligned.astype(u32))
    # Waves below lane 64 and above it pass different s_barrier instructions and swap halves.
    g = np.arange(ng * block).reshape(ng, block)
    lid = np.arange(block)
    partner = g[:, ::-1]
    want3 = np.where(lid < 64, partner * 3 + 0, partner * 2 + 1)
    np.testing.assert_array_equal(dev.download(out3, ng * block, i32).reshape(ng, block), want3)
