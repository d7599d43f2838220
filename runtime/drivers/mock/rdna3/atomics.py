# numpy's stubs type lane arithmetic on uint32 scalars and arrays as unions mypy cannot narrow:
# mypy: disable-error-code="operator"
"""Read-modify-write on a numpy array for many lanes at once, with lane-order semantics.

When several lanes hit one address, the hardware performs their operations one after the other
and each returning lane sees the value before its own operation. `rmw` reproduces that in lane
order (the order of `idx`): without returned values through `ufunc.at` (which applies duplicates
in order), integer add/sub with returned values through a segmented prefix sum, and everything
else in rounds where each round serves at most one lane per address.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

Op = Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray]


def _inc(old: np.ndarray, src: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    return np.where(old >= src, old.dtype.type(0), old + old.dtype.type(1))


def _dec(old: np.ndarray, src: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    one = old.dtype.type(1)
    return np.where((old == 0) | (old > src), src, old - one)


def _fmin(old: np.ndarray, src: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    return np.fmin(old, src) if old.dtype.kind == "f" else np.minimum(old, src)


def _fmax(old: np.ndarray, src: np.ndarray, cmp: np.ndarray | None) -> np.ndarray:
    return np.fmax(old, src) if old.dtype.kind == "f" else np.maximum(old, src)


OPS: dict[str, Op] = {
    "add": lambda o, s, c: o + s,
    "sub": lambda o, s, c: o - s,
    "rsub": lambda o, s, c: s - o,
    "min": _fmin, "max": _fmax,
    "and": lambda o, s, c: o & s,
    "or": lambda o, s, c: o | s,
    "xor": lambda o, s, c: o ^ s,
    "swap": lambda o, s, c: s,
    "storexchg": lambda o, s, c: s,
    "inc": _inc, "dec": _dec,
    # buffer/global_atomic_csub_u32: subtract, clamping at 0 (RDNA3 ISA section 16.16)
    "csub": lambda o, s, c: np.where(o < s, o.dtype.type(0), o - s),
    # compare-and-swap: store src where the old value equals cmp
    "cmpswap": lambda o, s, c: np.where(o == c, s, o),
    "cmpstore": lambda o, s, c: np.where(o == c, s, o),
    # ds_mskor: clear the bits of data0, set those of data1; ds_wrap: subtract data0 once the
    # value reaches it, else add data1 (RDNA3 ISA section 11, DS opcodes)
    "mskor": lambda o, s, c: (o & ~s) | c,
    "wrap": lambda o, s, c: np.where(o >= s, o - s, o + c),
}
_AT = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
       "or": np.bitwise_or, "xor": np.bitwise_xor}


def _ranks(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable order by address, and each lane's occurrence number among lanes of its address."""
    order = np.argsort(idx, kind="stable")
    s = idx[order]
    start = np.ones(len(s), dtype=bool)
    start[1:] = s[1:] != s[:-1]
    seg_start = np.maximum.accumulate(np.where(start, np.arange(len(s)), 0))
    rank = np.empty(len(s), dtype=np.int64)
    rank[order] = np.arange(len(s)) - seg_start
    return order, rank


def rmw(arr: np.ndarray, idx: np.ndarray, op: str, src: np.ndarray,
        cmp: np.ndarray | None = None, want_old: bool = True) -> np.ndarray | None:
    """Applies `op` at arr[idx[i]] with src[i] for each lane i in order; returns the old values."""
    if len(idx) == 0:
        return np.zeros(0, dtype=arr.dtype) if want_old else None
    src = np.asarray(src, dtype=arr.dtype)
    if op == "sub" and arr.dtype.kind in "iu":
        src, op = (np.zeros_like(src) - src), "add"  # modular: a - b == a + (-b)
    if not want_old and op in _AT:
        _AT[op].at(arr, idx, src)
        return None
    if op == "add" and arr.dtype.kind in "iu":
        return _add_returning(arr, idx, src)
    if op in ("cmpswap", "cmpstore") and cmp is not None:
        return _compare_swap(arr, idx, src, np.asarray(cmp, dtype=arr.dtype))
    fn = OPS[op]
    _, rank = _ranks(idx)
    old = np.empty(len(idx), dtype=arr.dtype)
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        i = idx[sel]
        o = arr[i]
        old[sel] = o
        arr[i] = fn(o, src[sel], None if cmp is None else np.asarray(cmp, arr.dtype)[sel])
    return old if want_old else None


def _add_returning(arr: np.ndarray, idx: np.ndarray, src: np.ndarray) -> np.ndarray:
    """Integer fetch-add for many lanes: old value = initial + sum of earlier lanes' operands."""
    order = np.argsort(idx, kind="stable")
    s_idx, s_src = idx[order], src[order]
    csum = np.cumsum(s_src, dtype=arr.dtype)
    start = np.ones(len(s_idx), dtype=bool)
    start[1:] = s_idx[1:] != s_idx[:-1]
    seg_first = np.maximum.accumulate(np.where(start, np.arange(len(s_idx)), 0))
    before = csum - s_src - (csum[seg_first] - s_src[seg_first])  # exclusive, per segment
    old_sorted = arr[s_idx] + before
    old = np.empty_like(old_sorted)
    old[order] = old_sorted
    np.add.at(arr, idx, src)
    return old


def _compare_swap(arr: np.ndarray, idx: np.ndarray, src: np.ndarray, cmp: np.ndarray
                  ) -> np.ndarray:
    """Compare-and-swap for many lanes in lane order, in rounds of successes rather than of
    lanes: per address, the next lane whose compare value equals the current value succeeds;
    the lanes before it (and it) see the current value. Contended retry loops (every lane on one
    address, one success per pass) then cost two rounds per instruction, not one per lane."""
    n = len(idx)
    if idx[0] == idx.min() == idx.max():
        return compare_swap_one(arr, int(idx[0]), src, cmp)
    order = np.argsort(idx, kind="stable")
    s_idx, s_src, s_cmp = idx[order], src[order], cmp[order]
    start = np.ones(n, dtype=bool)
    start[1:] = s_idx[1:] != s_idx[:-1]
    seg_start = np.flatnonzero(start)
    seg_end = np.append(seg_start[1:], n)
    seg = np.cumsum(start) - 1                      # segment of each sorted lane
    pos_all = np.arange(n)
    cur = arr[s_idx[seg_start]].copy()
    pos = seg_start.copy()
    live = np.ones(len(seg_start), dtype=bool)
    old = np.empty(n, dtype=arr.dtype)
    while live.any():
        waiting = live[seg] & (pos_all >= pos[seg])
        hit = waiting & (s_cmp == cur[seg])
        first = np.full(len(seg_start), n)
        np.minimum.at(first, seg[hit], pos_all[hit])
        seen = waiting & (pos_all <= first[seg])
        old[seen] = cur[seg[seen]]
        won = live & (first < n)
        cur[won] = s_src[first[won]]
        pos[won] = first[won] + 1
        live = won & (pos < seg_end)
    arr[s_idx[seg_start]] = cur
    out = np.empty_like(old)
    out[order] = old
    return out


def compare_swap_one(arr: np.ndarray, i: int, src: np.ndarray, cmp: np.ndarray) -> np.ndarray:
    """Compare-and-swap in lane order when every lane has the same address arr[i] (a contended
    retry loop); the old value each lane sees."""
    n = len(src)
    old = np.empty(n, dtype=arr.dtype)
    cur = arr[i]
    p = 0
    while p < n:
        hits = np.flatnonzero(cmp[p:] == cur)
        if not len(hits):
            old[p:] = cur
            break
        j = p + int(hits[0])
        old[p:j + 1] = cur
        cur = src[j]
        p = j + 1
    arr[i] = cur
    return old
