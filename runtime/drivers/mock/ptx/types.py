"""PTX types as numpy dtypes, and the conversions between them that PTX defines (rounding modes,
saturation, fp16/bf16)."""
from __future__ import annotations

from typing import Any

import numpy as np

U: dict[int, np.dtype[Any]] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16),
                               4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
S: dict[int, np.dtype[Any]] = {1: np.dtype(np.int8), 2: np.dtype(np.int16),
                               4: np.dtype(np.int32), 8: np.dtype(np.int64)}
F: dict[int, np.dtype[Any]] = {2: np.dtype(np.float16), 4: np.dtype(np.float32),
                               8: np.dtype(np.float64)}


class PtxType:
    """One PTX scalar type: its name, size, kind ("u", "s", "b", "f", "bf", "pred", "x2": packed
    pairs) and the numpy dtype values of it are computed in (bf16 is held as its bits, uint16)."""

    __slots__ = ("name", "size", "kind", "dtype", "udtype")

    def __init__(self, name: str, size: int, kind: str, dtype: np.dtype[Any]) -> None:
        self.name, self.size, self.kind = name, size, kind
        self.dtype: np.dtype[Any] = dtype
        self.udtype: np.dtype[Any] = U.get(size, np.dtype(np.uint8)) if kind != "pred" \
            else np.dtype(np.bool_)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_signed(self) -> bool:
        return self.kind == "s"

    def __repr__(self) -> str:
        return f".{self.name}"


def _mk() -> dict[str, PtxType]:
    t: dict[str, PtxType] = {"pred": PtxType("pred", 1, "pred", np.dtype(np.bool_))}
    for n in (8, 16, 32, 64):
        b = n // 8
        t[f"u{n}"] = PtxType(f"u{n}", b, "u", U[b])
        t[f"s{n}"] = PtxType(f"s{n}", b, "s", S[b])
        t[f"b{n}"] = PtxType(f"b{n}", b, "b", U[b])
    for n in (16, 32, 64):
        t[f"f{n}"] = PtxType(f"f{n}", n // 8, "f", F[n // 8])
    t["bf16"] = PtxType("bf16", 2, "bf", U[2])
    t["f16x2"] = PtxType("f16x2", 4, "x2", U[4])
    t["bf16x2"] = PtxType("bf16x2", 4, "x2", U[4])
    t["tf32"] = PtxType("tf32", 4, "b", U[4])
    return t


TYPES = _mk()


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32 (exact)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """float32 -> bf16 bit patterns, rounding to nearest even (NaN stays a quiet NaN), or
    towards zero with `mode` "rz"."""
    b = np.asarray(x, np.float32).view(np.uint32)
    if mode == "rz":
        out = b >> np.uint32(16)
    else:
        lsb = (b >> np.uint32(16)) & np.uint32(1)
        out = (b + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, np.float32))
    out = np.where(nan, (b >> np.uint32(16)) | np.uint32(0x40), out)
    return out.astype(np.uint16)


def f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bit patterns, rounded once to nearest even: through float32 rounded to
    odd (24 bits keep the sticky information an 8-bit rounding needs, so no double rounding)."""
    x = np.asarray(x, np.float64)
    r = x.astype(np.float32)
    over = np.abs(r.astype(np.float64)) > np.abs(x)
    r = np.where(over & np.isfinite(x) & np.isfinite(r), np.nextafter(r, np.float32(0)), r)
    inexact = (r.astype(np.float64) != x) & np.isfinite(x)
    bits = r.view(np.uint32) | np.where(inexact, np.uint32(1), np.uint32(0))
    return f32_to_bf16(bits.view(np.float32))


def round_f32(exact: np.ndarray, mode: str) -> np.ndarray:
    """A float64 value (assumed exact) rounded to float32 in a PTX rounding mode (rn, rz, rm,
    rp)."""
    exact = np.asarray(exact, np.float64)
    r = exact.astype(np.float32)
    if mode in ("rn", ""):
        return r
    rd = r.astype(np.float64)
    if mode == "rz":
        fix = np.abs(rd) > np.abs(exact)
        return np.where(fix, np.nextafter(r, np.float32(0)), r)
    if mode == "rm":
        return np.where(rd > exact, np.nextafter(r, np.float32(-np.inf)), r)
    if mode == "rp":
        return np.where(rd < exact, np.nextafter(r, np.float32(np.inf)), r)
    raise ValueError(mode)


def ftz(x: np.ndarray) -> np.ndarray:
    """Flushes float32 subnormals to sign-preserving zero."""
    tiny = np.abs(x) < np.float32(1.1754944e-38)
    if not np.any(tiny):
        return x
    return np.where(tiny, np.copysign(np.float32(0), x), x)


def float_to_int(x: np.ndarray, dst: PtxType, mode: str) -> np.ndarray:
    """A float converted to an integer type: rounded by `mode` (rni, rzi, rmi, rpi), saturated to
    the destination's range, NaN -> 0 (PTX cvt semantics)."""
    xf = np.asarray(x, np.float64)
    if mode in ("rni", "rn"):
        r = np.rint(xf)
    elif mode in ("rmi", "rm"):
        r = np.floor(xf)
    elif mode in ("rpi", "rp"):
        r = np.ceil(xf)
    else:
        r = np.trunc(xf)
    info = np.iinfo(dst.dtype)
    r = np.where(np.isnan(r), 0.0, r)
    if dst.size == 8:
        # float64 cannot hold the 64-bit bounds exactly: clamp with care.
        hi_f = float(info.max) + 1.0
        over = r >= hi_f
        under = r < float(info.min)
        safe = np.where(over | under, 0.0, r)
        out = safe.astype(dst.dtype)
        out = np.where(over, dst.dtype.type(info.max), out)
        return np.where(under, dst.dtype.type(info.min), out)
    return np.clip(r, info.min, info.max).astype(dst.dtype)


def round_to_int_float(x: np.ndarray, mode: str) -> np.ndarray:
    """Rounds a float to an integral value in the same type (cvt.rni.f32.f32 and friends)."""
    if mode == "rni":
        return np.rint(x)
    if mode == "rmi":
        return np.floor(x)
    if mode == "rpi":
        return np.ceil(x)
    if mode == "rzi":
        return np.trunc(x)
    return x
