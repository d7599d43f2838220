#!/usr/bin/env python3
"""What CUDA writes for a launch on Hopper: its QMDs and pushbuffers, read from its own process.

A developer tool with two halves.

On the device (`--sniff OUT`), in one process: a helper built with nvcc
(scripts/sniff_cuda_launches.cu, loaded with ctypes) launches kernels of a distinctive shape
(block 96 threads; each kind of launch its own grid width and a magic argument) through CUDA's own
paths: a captured graph of chained launches, back-to-back stream launches, programmatic dependent
launches (the consumer waits with griddepcontrol.wait; one kind also triggers its dependents with
griddepcontrol.launch_dependents) on a stream and captured into graphs. After each kind the script
reads this process's GPU mappings (`/proc/self/maps` entries backed by /dev/nvidia*, and anonymous
memory where CUDA keeps pinned host buffers) through pread on /proc/self/mem, never by
dereferencing them, and skips small /dev/nvidiaN mappings (register and doorbell windows). It
records QMDs (Hopper V04 version field, the kind's grid and block) at any dword offset (a QMD sent
inline sits in the pushbuffer), pushbuffer windows around the compute methods that send QMDs
(SEND_PCAS_A, SET_INLINE_QMD_ADDRESS_A, LOAD_INLINE_QMD_DATA), and the magic argument's places.
Then it reads through a kernel (a plain load from a GPU address) what the CPU cannot see: the QMDs
that SEND_PCAS_A names and those that QMDs name as dependents. The same scan runs in a child process
on this runtime's own launches of the same shapes (`--ours`). Everything is written raw under OUT.

Here (`--decode OUT`): every QMD's non-zero fields by name, per kind, the differences between the
members of a chain and against this runtime's QMD of the same launch, and the pushbuffer methods
around each send.

    python scripts/sniff_cuda_launches.py --sniff $OUT     # on the H200
    python scripts/sniff_cuda_launches.py --decode DIR     # anywhere
"""
from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hcq_bindings.nv import classes as cl  # noqa: E402

from runtime.drivers.nv.methods import decode_pushbuffer  # noqa: E402
from runtime.drivers.nv.qmd import QMDV04  # noqa: E402

BLOCK = 96
SNIFF_N = 6          # launches per sniffed chain: few enough that a ring still holds them all
TIME_N = 1000        # launches per timed chain
MAGIC = 0x5A1D0000
COMPUTE_CLASS = 0xCBC0  # HOPPER_COMPUTE_A


@dataclass(frozen=True)
class Kind:
    """One way of launching: `path` graph or stream, kernel 0 plain / 1 wait / 2 trigger, `pdl`
    programmatic stream serialization; `grid` and `magic` tell its launches apart in memory."""

    name: str
    path: str
    kernel: int
    pdl: int
    grid: int

    @property
    def magic(self) -> int:
        return MAGIC | self.grid


KINDS = [Kind("graph", "graph", 0, 0, 37), Kind("stream", "stream", 0, 0, 41),
         Kind("pdl_wait", "stream", 1, 1, 43), Kind("pdl_trigger", "stream", 2, 1, 47),
         Kind("pdl_graph", "graph", 1, 1, 53), Kind("pdl_trigger_graph", "graph", 2, 1, 59),
         Kind("graph_wait_nopdl", "graph", 1, 0, 61)]

# ---------------------------------------------------------------------------------- the scanner


@dataclass(frozen=True)
class Region:
    """One line of /proc/PID/maps."""

    start: int
    end: int
    perms: str
    offset: int
    path: str

    @property
    def size(self) -> int:
        return self.end - self.start


_MAPS = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) ([0-9a-f]+) \S+ \d+\s*(.*)$")
REGISTER_WINDOW_B = 64 << 10   # a /dev/nvidiaN mapping this small is a register/doorbell window
# Larger mappings are left out: not a pushbuffer or QMD pool, and reading an unpopulated managed
# range would populate it.
REGION_LIMIT_B = 256 << 20


def parse_maps(text: str) -> list[Region]:
    """The regions of a /proc/PID/maps text."""
    out = []
    for line in text.splitlines():
        m = _MAPS.match(line)
        if m:
            out.append(Region(int(m[1], 16), int(m[2], 16), m[3], int(m[4], 16), m[5].strip()))
    return out


def scan_plan(regions: Iterable[Region]) -> list[tuple[Region, str]]:
    """(region, why) for every region worth reading, the driver's first: readable GPU-driver
    mappings except register windows, and readable anonymous memory (where a driver's pinned host
    buffers live); none larger than REGION_LIMIT_B."""
    driver, anon = [], []
    for r in regions:
        if "r" not in r.perms or r.size > REGION_LIMIT_B:
            continue
        if r.path.startswith("/dev/nvidia"):
            if re.fullmatch(r"/dev/nvidia\d+", r.path) and r.size <= REGISTER_WINDOW_B:
                continue
            driver.append((r, "driver"))
        elif "w" in r.perms and (r.path in ("", "[heap]") or r.path.startswith(
                ("/dev/zero", "[anon", "/memfd:"))):  # private or shared anonymous memory
            anon.append((r, "anonymous"))
    return driver + anon


def read_region(read: Callable[[int, int], bytes], r: Region, chunk: int = 1 << 20
                ) -> tuple[bytes, list[tuple[int, str]]]:
    """The region's bytes through `read(addr, size)`; a chunk that fails reads as zeros and is
    listed (offset, error)."""
    parts, errs = [], []
    for off in range(0, r.size, chunk):
        n = min(chunk, r.size - off)
        try:
            b = read(r.start + off, n)
            if len(b) < n:
                errs.append((off + len(b), "short read"))
                b = b + bytes(n - len(b))
        except OSError as e:
            errs.append((off, e.strerror or str(e)))
            b = bytes(n)
        parts.append(b)
    return b"".join(parts), errs


def _dword(name: str, index: int | None = None) -> tuple[int, int, int]:
    f = QMDV04.dword_field(name, index)
    return f.index, f.shift, f.mask


QMD_WORDS = QMDV04.size_B // 4


def find_qmds(data: bytes, grids: Sequence[int], block: int = BLOCK) -> list[tuple[int, int]]:
    """(byte offset, grid width) of every V04 QMD at a dword offset of `data` whose grid is
    (one of `grids`, 1, 1) and whose CTA is (block, 1, 1)."""
    u = np.frombuffer(data, "<u4", len(data) // 4)
    gi, gs, gm = _dword("GRID_WIDTH")
    cand = np.nonzero(np.isin((u >> gs) & gm, np.asarray(grids, np.uint32)))[0] - gi
    cand = cand[(cand >= 0) & (cand + QMD_WORDS <= len(u))]
    if not len(cand):
        return []

    def at(name: str) -> np.ndarray:
        i, s, m = _dword(name)
        return (u[cand + i] >> s) & m

    ok = (at("GRID_HEIGHT") == 1) & (at("GRID_DEPTH") == 1) & \
        (at("CTA_THREAD_DIMENSION0") == block) & (at("CTA_THREAD_DIMENSION1") == 1) & \
        (at("CTA_THREAD_DIMENSION2") == 1) & (at("QMD_MAJOR_VERSION") == QMDV04.major)
    return [(int(c) * 4, int(g)) for c, g in zip(cand[ok], at("GRID_WIDTH")[ok])]


# the compute methods that send or load a QMD, by method offset
SEND_METHODS = {cl.NVCBC0_SEND_PCAS_A: "SEND_PCAS_A",
                cl.NVCBC0_SET_INLINE_QMD_ADDRESS_A: "SET_INLINE_QMD_ADDRESS_A",
                cl.NVCBC0_LOAD_INLINE_QMD_DATA(0): "LOAD_INLINE_QMD_DATA"}
_OP_INC, _OP_NONINC, _OP_IMMD, _OP_ONEINC = (cl.NVC56F_DMA_SEC_OP_INC_METHOD,
                                             cl.NVC56F_DMA_SEC_OP_NON_INC_METHOD,
                                             cl.NVC56F_DMA_SEC_OP_IMMD_DATA_METHOD,
                                             cl.NVC56F_DMA_SEC_OP_ONE_INC)


def find_methods(data: bytes, methods: dict[int, str] = SEND_METHODS) -> list[dict[str, Any]]:
    """Method headers (incrementing, non-incrementing or one-increment, 1..127 data dwords) whose
    method is one of `methods`: {offset (bytes), subc, method, op, count, data (first dword)}."""
    u = np.frombuffer(data, "<u4", len(data) // 4)
    op = u >> 29
    count = (u >> 16) & 0x1FFF
    addr = (u & 0xFFF) << 2
    ok = np.isin(addr, np.asarray(list(methods), np.uint32)) & \
        np.isin(op, np.asarray([_OP_INC, _OP_NONINC, _OP_ONEINC], np.uint32)) & \
        (count >= 1) & (count < 128) & (((u >> 12) & 1) == 0)
    out = []
    for at in np.nonzero(ok)[0]:
        i = int(at)
        if i + 1 >= len(u):
            continue
        nxt = i + 1 + int(count[i])
        out.append({"offset": i * 4, "subc": int((u[i] >> 13) & 7), "method": int(addr[i]),
                    "op": int(op[i]), "count": int(count[i]), "data": int(u[i + 1]),
                    "next": int(u[nxt]) if nxt < len(u) else -1})
    return out


_PCAS_B = (cl.NVCBC0_SEND_SIGNALING_PCAS2_B, cl.NVCBC0_SEND_PCAS_A + 4)


def plausible_send(h: dict[str, Any]) -> bool:
    """Whether a SEND_PCAS_A header found by `find_methods` is followed, as a launch's are, by
    its second half (SEND_PCAS_B in the same incrementing method, or SEND_SIGNALING_PCAS2_B or
    SEND_PCAS_B next on the same subchannel): a random dword that looks like the header rarely
    is, and a read through a kernel of a wrong address loses the context."""
    if h["method"] != cl.NVCBC0_SEND_PCAS_A or h["op"] not in (_OP_INC, _OP_NONINC):
        return False
    if h["op"] == _OP_INC and h["count"] >= 2:
        return True
    n = h.get("next", -1)
    return n >= 0 and (n >> 29) in (_OP_INC, _OP_NONINC, _OP_IMMD, _OP_ONEINC) and \
        (n >> 13) & 7 == h["subc"] and (n & 0xFFF) << 2 in _PCAS_B


def gp_clusters(entries: list[dict[str, Any]], span: int = 64 << 20) -> list[dict[str, Any]]:
    """The GPFIFO entries that have a neighbour in the list (the next or previous 8 bytes of the
    same ring) naming a segment within `span` of theirs: a ring's entries come in runs, and a
    pointer that only looks like an entry seldom has such a neighbour."""
    at = {e["cpu"]: e for e in entries}
    return [e for e in entries if any(
        (n := at.get(e["cpu"] + d)) is not None and abs(n["va"] - e["va"]) < span
        for d in (-8, 8))]


def find_word(data: bytes, value: int, limit: int = 64) -> list[int]:
    """Byte offsets (dword aligned) of `value` in `data`, at most `limit`."""
    u = np.frombuffer(data, "<u4", len(data) // 4)
    return [int(i) * 4 for i in np.nonzero(u == value)[0][:limit]]


GP_MAX_DWORDS = 1 << 16   # a longer segment is not what a launch submits


def find_gp_entries(data: bytes) -> list[tuple[int, int, int]]:
    """(byte offset, pushbuffer VA, length in dwords) of every 8-byte aligned word that reads as a
    GPFIFO entry (clc56f.h GP_ENTRY0/1: GET 31:2 and GET_HI 7:0 the address, LENGTH 30:10, PRIV
    clear) of a plausible segment (1..GP_MAX_DWORDS dwords, above the first MiB)."""
    u = np.frombuffer(data, "<u8", len(data) // 8)
    e0, e1 = u & 0xFFFFFFFF, u >> 32
    va = (e0 & ~np.uint64(3)) | ((e1 & 0xFF) << 32)
    length = (e1 >> 10) & 0x1FFFFF
    ok = ((e0 & 2) == 0) & ((e1 & 0x100) == 0) & (length >= 1) & (length <= GP_MAX_DWORDS) & \
        (va >= 1 << 20)
    return [(int(i) * 8, int(va[i]), int(length[i])) for i in np.nonzero(ok)[0]]


def qmd_pointers(q: QMDV04) -> dict[str, int]:
    """The GPU addresses a QMD names: enabled dependent QMDs, and constant bank 0."""
    out = {}
    for s in range(QMDV04.dependent_slots):
        if q.get("DEPENDENT_QMD_ENABLE", s):
            out[f"dependent{s}"] = q.get(f"DEPENDENT_QMD{s}_POINTER") << 8
    if q.get("CONSTANT_BUFFER_VALID", 0):
        out["cbuf0"] = (q.get("CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6", 0)
                        | q.get("CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6", 0) << 32) << 6
    return out


@dataclass
class Finding:
    """What one scan found for one kind (offsets are CPU addresses)."""

    kind: str
    qmds: list[dict[str, Any]] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    magic: list[dict[str, Any]] = field(default_factory=list)
    gp: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    scanned_B: int = 0


class Sink:
    """Raw blobs under a folder, named by content, listed in a manifest that is rewritten after
    every addition (a later fault loses nothing already found)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "raw").mkdir(parents=True, exist_ok=True)
        self.manifest: dict[str, Any] = {"kinds": {}, "peeks": [], "timings": {}, "notes": []}

    def blob(self, data: bytes) -> str:
        name = "raw/" + hashlib.sha1(data).hexdigest()[:16] + ".bin"
        p = self.root / name
        if not p.exists():
            p.write_bytes(data)
        return name

    def save(self) -> None:
        (self.root / "manifest.json").write_text(json.dumps(self.manifest, indent=1))


WINDOW_BEFORE_B, WINDOW_AFTER_B = 2048, 2048
MAX_WINDOWS, MAX_QMDS, MAX_MAGIC, MAX_GP = 48, 64, 32, 32


def _driver(name: str) -> bool:
    return name.startswith("/dev/nvidia")


def scan(kind: str, grids: Sequence[int], magics: Sequence[int],
         regions: Iterable[tuple[int, bytes, str]], sink: Sink, seen: dict[int, str],
         gp_region: Callable[[str], bool] = _driver,
         segment_region: Callable[[str], bool] = _driver) -> Finding:
    """Finds kind's QMDs, send windows and magic arguments in `regions` (start, bytes, name), and
    the GPFIFO entries that appeared in regions `gp_region` accepts, with their segments where
    those lie in regions `segment_region` accepts; `seen` maps window and entry addresses to what
    an earlier scan found there (a window whose bytes, or an entry whose value, did not change
    since belongs to an earlier kind)."""
    f = Finding(kind)
    by_blob: dict[str, dict[str, Any]] = {}
    kept: list[tuple[int, bytes]] = []  # the regions GPFIFO entries are read from
    for start, data, name in regions:
        f.scanned_B += len(data)
        if segment_region(name):
            kept.append((start, data))
        for off, g in find_qmds(data, grids):
            blob = sink.blob(data[off:off + QMDV04.size_B])
            if blob in by_blob:  # the same bytes again (a copy, or this scan's own)
                by_blob[blob]["copies"].append(start + off)
            elif len(f.qmds) < MAX_QMDS:
                by_blob[blob] = {"cpu": start + off, "region": name, "grid": g, "blob": blob,
                                 "copies": []}
                f.qmds.append(by_blob[blob])
        for m in magics:
            for off in find_word(data, m, MAX_MAGIC - len(f.magic)):
                lo = max(0, off - 256) & ~3
                f.magic.append({"cpu": start + off, "region": name, "value": m,
                                "window_cpu": start + lo,
                                "blob": sink.blob(data[lo:off + 256])})
        for h in find_methods(data):
            if len(f.windows) >= MAX_WINDOWS:
                break
            lo = max(0, h["offset"] - WINDOW_BEFORE_B)
            hi = min(len(data), h["offset"] + WINDOW_AFTER_B)
            raw = data[lo:hi]
            key = start + h["offset"]
            digest = hashlib.sha1(raw).hexdigest()
            if seen.get(key) == digest:
                continue
            seen[key] = digest
            f.windows.append({**h, "cpu": key, "window_cpu": start + lo, "region": name,
                              "blob": sink.blob(raw)})
        if gp_region(name):
            for off, va, n in find_gp_entries(data):
                key, val = start + off, f"gp:{va:x}:{n}"
                if seen.get(key) == val:
                    continue
                seen[key] = val
                if len(f.gp) < MAX_GP:
                    f.gp.append({"cpu": key, "region": name, "va": va, "dwords": n})
    # A segment in memory the CPU sees (a driver maps its pushbuffers at the same address for
    # the CPU and the GPU) is kept as it was when its kind ran: later kinds reuse the ring.
    for e in f.gp:
        for start, data in kept:
            if start <= e["va"] and e["va"] + 4 * e["dwords"] <= start + len(data):
                lo = e["va"] - start
                e["segment_blob"] = sink.blob(data[lo:lo + min(4 * e["dwords"], SEGMENT_MAX_B)])
                break
    return f


SCAN_SECONDS = 30.0   # one scan reads no more regions after this long (reads over PCIe are slow)


def proc_mem_regions(plan: list[tuple[Region, str]], errors: list[str],
                     budget_s: float = SCAN_SECONDS) -> Iterable[tuple[int, bytes, str]]:
    """The planned regions' bytes, read through /proc/self/mem, until `budget_s` has passed."""
    fd = os.open("/proc/self/mem", os.O_RDONLY)
    t0 = time.perf_counter()
    try:
        for n, (r, why) in enumerate(plan):
            if time.perf_counter() - t0 > budget_s:
                errors.append(f"out of time: {len(plan) - n} regions not read")
                return
            t = time.perf_counter()
            data, errs = read_region(lambda a, n: os.pread(fd, n, a), r)
            dt = time.perf_counter() - t
            if errs:
                errors.append(f"{r.start:#x}-{r.end:#x} {r.path or why}: {len(errs)} chunks "
                              f"unreadable ({errs[0][1]})")
            if dt > 1.0:
                errors.append(f"{r.start:#x}-{r.end:#x} {r.path or why}: read in {dt:.1f} s")
            yield r.start, data, f"{r.path or why}@{r.start:#x}+{r.size:#x}"
    finally:
        os.close(fd)


def scan_self(kind: str, grids: Sequence[int], magics: Sequence[int], sink: Sink,
              seen: dict[int, str]) -> Finding:
    """One scan of this process's GPU mappings."""
    plan = scan_plan(parse_maps(Path("/proc/self/maps").read_text()))
    errors: list[str] = []
    t = time.perf_counter()
    f = scan(kind, grids, magics, proc_mem_regions(plan, errors), sink, seen)
    f.errors = errors + [f"{len(plan)} regions, {f.scanned_B >> 20} MiB in "
                         f"{time.perf_counter() - t:.1f} s"]
    return f


# ---------------------------------------------------------------------------------- the device side


def build_helper(tmp: Path) -> Path:
    """libsniff.so from scripts/sniff_cuda_launches.cu with nvcc."""
    nvcc = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",)
                                         if os.path.exists(p)), None)
    if nvcc is None:
        raise SystemExit("nvcc not found")
    lib = tmp / "libsniff.so"
    r = subprocess.run([nvcc, "-O2", "-arch=sm_90", "-shared", "-Xcompiler", "-fPIC", "-o",
                        str(lib), str(ROOT / "scripts" / "sniff_cuda_launches.cu")],
                       capture_output=True, text=True, timeout=240)
    if r.returncode:
        raise SystemExit("nvcc failed: " + (r.stderr or r.stdout)[-2000:])
    return lib


def sniff(out: Path, time_reps: int, max_peeks: int) -> None:
    """The device half: CUDA's launches of every kind, a scan after each, the timings, then the
    reads through a kernel (last: a wrong address there faults only this context)."""
    sink = Sink(out)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        lib = ctypes.CDLL(str(build_helper(Path(d))))  # loaded: the file may go
    sink.manifest["notes"].append(f"helper built in {time.perf_counter() - t0:.1f} s")
    lib.sn_error.restype = ctypes.c_char_p
    lib.sn_buffer.restype = ctypes.c_ulonglong
    lib.sn_peek.argtypes = [ctypes.c_ulonglong, ctypes.c_void_p, ctypes.c_int]

    def check(e: int, what: str) -> None:
        if e:
            raise RuntimeError(f"{what}: CUDA error {e} {lib.sn_error(e).decode()}")

    check(lib.sn_init(), "init")
    sink.manifest["buffer_va"] = lib.sn_buffer()
    sink.manifest["maps"] = Path("/proc/self/maps").read_text()
    ms = ctypes.c_double()
    seen: dict[int, str] = {}
    # a first scan before any sniffed launch: what is there already is nobody's
    base = scan_self("baseline", [k.grid for k in KINDS], [k.magic for k in KINDS], sink, seen)
    sink.manifest["baseline"] = asdict(base)
    for k in KINDS:
        fn = lib.sn_graph if k.path == "graph" else lib.sn_stream
        t = time.perf_counter()
        e = fn(k.kernel, k.pdl, SNIFF_N, k.grid, BLOCK, ctypes.c_uint(k.magic), 2,
               ctypes.byref(ms))
        entry: dict[str, Any] = asdict(k)
        if e:
            entry["error"] = f"CUDA error {e} {lib.sn_error(e).decode()}"
        else:
            f = scan_self(k.name, [k.grid], [k.magic], sink, seen)
            entry.update(asdict(f))
            entry["scan_s"] = round(time.perf_counter() - t, 2)
        sink.manifest["kinds"][k.name] = entry
        sink.save()
        print(f"{k.name}: {entry.get('error') or ''} qmds={len(entry.get('qmds', []))} "
              f"windows={len(entry.get('windows', []))} magic={len(entry.get('magic', []))} "
              f"scanned={entry.get('scanned_B', 0) >> 20} MiB errors={entry.get('errors')}",
              flush=True)
    # timings: 1000 launches of 4 x 256 threads, as the benchmarks run them
    for k in KINDS:
        fn = lib.sn_graph if k.path == "graph" else lib.sn_stream
        e = fn(k.kernel, k.pdl, TIME_N, 4, 256, ctypes.c_uint(1), time_reps, ctypes.byref(ms))
        sink.manifest["timings"][k.name] = (f"error {e} {lib.sn_error(e).decode()}" if e
                                            else ms.value)
        sink.save()
    print("timings (ms, 1000 launches):", json.dumps(sink.manifest["timings"]), flush=True)
    peek_all(lib, sink, max_peeks)
    lib.sn_release()


SEGMENT_MAX_B = 64 << 10
CBUFS_PER_KIND, PER_KIND = 2, 12   # constant banks, and sends or segments, read per kind


def peek_targets(sink: Sink, trusted: Callable[[str], bool] = _driver
                 ) -> list[tuple[int, int, str, str]]:
    """(GPU address, bytes, kind, why) to read through a kernel, most trustworthy first: the
    dependents and constant banks that QMDs found by the CPU name, the QMDs that plausible sends
    in `trusted` regions name, then the pushbuffer segments of the runs of GPFIFO entries each
    kind added."""
    out: list[tuple[int, int, str, str]] = []
    for name, k in sink.manifest["kinds"].items():
        for i, q in enumerate(k.get("qmds", [])):
            qm = QMDV04(bytearray((sink.root / q["blob"]).read_bytes()))
            for why, va in qmd_pointers(qm).items():
                if why != "cbuf0" or i < CBUFS_PER_KIND:
                    out.append((va, QMDV04.size_B, name, why))
    for name, k in sink.manifest["kinds"].items():
        sends = [w for w in k.get("windows", []) if trusted(w["region"]) and plausible_send(w)]
        out += [(w["data"] << 8, QMDV04.size_B, name, "SEND_PCAS_A")
                for w in sends[:PER_KIND]]
    for name, k in sink.manifest["kinds"].items():
        out += [(g["va"], min(g["dwords"] * 4, SEGMENT_MAX_B), name, "segment")
                for g in gp_clusters(k.get("gp", []))[:PER_KIND]]
    uniq, seen = [], set()
    for t in out:
        if t[0] and t[0] not in seen and t[0] < 1 << 49:
            seen.add(t[0])
            uniq.append(t)
    return uniq


def peek_all(lib: Any, sink: Sink, max_peeks: int,
             trusted: Callable[[str], bool] = _driver) -> None:
    """Reads what the CPU could not see: QMDs (following their dependent links), constant banks,
    pushbuffer segments (and the QMDs they send). The first failed read ends the reads (the
    context is lost)."""
    todo = peek_targets(sink, trusted)
    done: set[int] = set()
    cbufs: dict[str, int] = {}
    buf = ctypes.create_string_buffer(SEGMENT_MAX_B)
    while todo and len(done) < max_peeks:
        va, size, kind, why = todo.pop(0)
        if va in done or why.startswith("cbuf0") and cbufs.get(kind, 0) >= CBUFS_PER_KIND:
            continue
        if why.startswith("cbuf0"):
            cbufs[kind] = cbufs.get(kind, 0) + 1
        done.add(va)
        e = lib.sn_peek(ctypes.c_ulonglong(va), buf, size)
        rec: dict[str, Any] = {"va": va, "size": size, "kind": kind, "why": why}
        if e:
            rec["error"] = f"CUDA error {e} {lib.sn_error(e).decode()}"
            sink.manifest["peeks"].append(rec)
            sink.save()
            print(f"peek {va:#x} ({kind} {why}) failed: {rec['error']}; no more reads", flush=True)
            return
        raw = bytes(buf.raw[:size])
        rec["blob"] = sink.blob(raw)
        follow: list[tuple[int, int, str, str]] = []
        if why == "segment":
            for h in find_methods(raw):
                if plausible_send(h):
                    follow.append((h["data"] << 8, QMDV04.size_B, kind,
                                   f"SEND_PCAS_A in segment {va:#x}"))
        elif not why.startswith("cbuf0"):
            q = QMDV04(bytearray(raw))
            rec["is_qmd"] = q.get("QMD_MAJOR_VERSION") == QMDV04.major
            if rec["is_qmd"]:
                rec["grid"] = q.get("GRID_WIDTH")
                follow += [(va2, QMDV04.size_B, kind, f"{w2} of {va:#x}")
                           for w2, va2 in qmd_pointers(q).items()]
        todo[:0] = [t for t in follow if t[0] not in done]
        sink.manifest["peeks"].append(rec)
        sink.save()
    print(f"{len(done)} reads through a kernel", flush=True)


# ---------------------------------------------------------------------------------- ours


OURS_SRC = r"""
extern "C" __global__ void sniff_plain(unsigned *x, unsigned magic, int idx) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i & 0xFFFF] += magic + (unsigned)idx;
}
"""


def sniff_ours(out: Path, device: str) -> None:
    """This runtime's launches of the graph and stream kinds, found by the same scan of this
    process (which checks the scan on real mappings, too)."""
    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch

    sink = Sink(out)
    dev = NVDevice(device)
    prg = dev.program(dev.compiler.compile(OURS_SRC), "sniff_plain")
    x = dev.alloc(0x10000 * 4)
    seen: dict[int, str] = {}
    for k in KINDS[:2]:
        gs, ls = (k.grid, 1, 1), (BLOCK, 1, 1)
        if k.path == "graph":
            g = dev.graph([Launch(prg, (x, k.magic, i), gs, ls) for i in range(SNIFF_N)])
            g.replay(wait=True)
        else:
            for i in range(SNIFF_N):
                prg(x, k.magic, i, global_size=gs, local_size=ls)
        dev.synchronize()
        f = scan_self(k.name, [k.grid], [k.magic], sink, seen)
        sink.manifest["kinds"][k.name] = {**asdict(k), **asdict(f)}
        sink.save()
        print(f"ours {k.name}: qmds={len(f.qmds)} windows={len(f.windows)} "
              f"magic={len(f.magic)} errors={f.errors}", flush=True)
    dev.close()


# ---------------------------------------------------------------------------------- the decoder


def decode_qmd(raw: bytes) -> dict[str, int]:
    """Every non-zero field of a V04 QMD by name."""
    return QMDV04(bytearray(raw[:QMDV04.size_B])).decode()


def sync_decode(words: Sequence[int], hit: int, back: int = 256, limit: int = 48) -> list[str]:
    """The methods around the header at dword `hit`: decoding starts at the earliest dword within
    `back` before it from which the headers chain onto `hit` exactly."""
    start = hit
    for s in range(max(0, hit - back), hit):
        i, ok = s, True
        while i < hit:
            h = words[i]
            op = h >> 29
            if h == 0:  # a NOP dword
                i += 1
                continue
            if op == _OP_IMMD:
                i += 1
            elif op in (_OP_INC, _OP_NONINC, _OP_ONEINC) and (h >> 16) & 0x1FFF:
                i += 1 + ((h >> 16) & 0x1FFF)
            else:
                ok = False
                break
        if ok and i == hit:
            start = s
            break
    subc = {(words[hit] >> 13) & 7: COMPUTE_CLASS}
    lines = decode_pushbuffer(list(words[start:]), subc, limit=limit)
    return [f"(from dword {start - hit:+d})"] + lines


def collapse_nops(lines: list[str]) -> list[str]:
    """Runs of NOP lines as one "NOP x N" line."""
    out: list[str] = []
    run = 0
    for ln in lines + [""]:
        if ln.endswith("] NOP"):
            run += 1
            continue
        if run:
            out.append(f"NOP x {run}")
            run = 0
        if ln:
            out.append(ln)
    return out


def collapse_runs(lines: list[str], method: str = "LOAD_INLINE_DATA") -> list[str]:
    """Runs of writes to `method` (inline data) as their first line and a count."""
    out: list[str] = []
    run = 0
    for ln in lines + [""]:
        if f" {method} = " in ln and out and f" {method} = " in out[-1]:
            run += 1
            continue
        if run:
            out.append(f"... and {run} more {method}")
            run = 0
        if ln:
            out.append(ln)
    return out


def table(cols: dict[str, dict[str, int]]) -> list[str]:
    """Rows "FIELD  v0  v1 ..." (hexadecimal) of the fields non-zero in any column."""
    names = sorted({n for c in cols.values() for n in c})
    w = max((len(n) for n in names), default=10)
    out = [f"{'field (hex)':{w}}  " + "  ".join(f"{c:>10}" for c in cols)]
    for n in names:
        out.append(f"{n:{w}}  " + "  ".join(f"{cols[c].get(n, 0):>10x}" for c in cols))
    return out


def _volatile(name: str) -> bool:
    """Fields that differ between members of any chain (addresses), left out of the variants."""
    return any(s in name for s in ("ADDR", "POINTER", "PROGRAM_PREFETCH", "PAYLOAD"))


def variants(qmds: list[tuple[str, dict[str, int]]]) -> list[tuple[list[str], dict[str, int]]]:
    """QMDs grouped by their fields other than addresses: (member labels, fields of the first)."""
    groups: dict[tuple[tuple[str, int], ...], tuple[list[str], dict[str, int]]] = {}
    for label, f in qmds:
        key = tuple(sorted((n, v) for n, v in f.items() if not _volatile(n)))
        groups.setdefault(key, ([], f))[0].append(label)
    return list(groups.values())


def _diff(a: dict[str, int], b: dict[str, int]) -> str:
    d = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n) and not _volatile(n))
    return ", ".join(f"{n} {a.get(n, 0):#x}->{b.get(n, 0):#x}" for n in d) or "nothing"


def _qmds_of(root: Path, man: dict[str, Any], name: str) -> list[tuple[str, int, dict[str, int]]]:
    """(label, GPU or CPU address, fields) of every QMD of kind `name` in a sniff's folder."""
    k = man["kinds"][name]
    out = [(f"cpu{i}", q["cpu"], decode_qmd((root / q["blob"]).read_bytes()))
           for i, q in enumerate(k.get("qmds", []))]
    out += [(f"gpu{i}", p["va"], decode_qmd((root / p["blob"]).read_bytes()))
            for i, p in enumerate(x for x in man.get("peeks", [])
                                  if x["kind"] == name and x.get("is_qmd"))]
    return out


def decode(root: Path, ours_root: Path | None) -> list[str]:
    """The report of a sniff's folder (and of this runtime's, for the comparison)."""
    man = json.loads((root / "manifest.json").read_text())
    ours = json.loads((ours_root / "manifest.json").read_text()) if ours_root else None
    out: list[str] = [f"notes: {man.get('notes')}", f"timings (ms): {man.get('timings')}"]
    peeks = man.get("peeks", [])
    for name, k in man["kinds"].items():
        out.append("")
        out.append(f"=== {name}: grid {k.get('grid')}, {k.get('error') or ''}"
                   f"{len(k.get('qmds', []))} QMDs by the CPU, {len(k.get('windows', []))} "
                   f"send windows, {len(k.get('gp', []))} new GPFIFO entries, magic at "
                   f"{len(k.get('magic', []))} places; scan errors {k.get('errors')}")
        qs = _qmds_of(root, man, name)
        where = {addr: label for label, addr, _ in qs}
        for label, addr, f in qs:
            links = [f"{s}={'->' + where.get(v, hex(v))}" for s, v in
                     qmd_pointers(QMDV04(bytearray(_raw_of(root, man, name, label)))).items()
                     if s.startswith("dependent")]
            out.append(f"  {label}: {addr:#x} grid {f.get('GRID_WIDTH', 0)}"
                       + (f" action {f.get('DEPENDENT_QMD_ACTION(0)', 0)} {' '.join(links)}"
                          if links else ""))
        vs = variants([(label, f) for label, _, f in qs])
        mine = variants([(f"ours{i}", f) for i, (_, _, f) in enumerate(
            _qmds_of(ours_root, ours, name))]) if ours and ours_root and name in ours["kinds"] \
            else []
        cols = {f"V{i}": f for i, (_, f) in enumerate(vs)}
        cols.update({f"ours{i}": f for i, (_, f) in enumerate(mine)})
        for i, (labels, _) in enumerate(vs):
            out.append(f"  V{i}: {len(labels)} QMDs ({' '.join(labels[:12])})")
        if cols:
            out += ["  " + ln for ln in table(cols)]
            if vs and mine:
                for i, (_, f) in enumerate(vs):
                    out.append(f"  ours0 -> V{i}: {_diff(mine[0][1], f)}")
        for p in peeks:
            if p["kind"] == name and p.get("why", "").startswith("cbuf0") and "blob" in p:
                w = np.frombuffer((root / p["blob"]).read_bytes(), "<u4")
                nz = np.nonzero(w)[0]
                w = w[:int(nz[-1]) + 1] if len(nz) else w[:0]
                out.append(f"  constant bank at {p['va']:#x}: "
                           + " ".join(f"{x:08x}" for x in w[:96]))
        for m in k.get("magic", [])[:4]:
            raw = (root / m["blob"]).read_bytes()
            mw = [int(x) for x in np.frombuffer(raw, "<u4", len(raw) // 4)]
            at = (m["cpu"] - m["window_cpu"]) // 4
            out.append(f"  magic at {m['cpu']:#x} ({m['region']}): " + " ".join(
                ("[" if i == at else "") + f"{mw[i]:08x}" + ("]" if i == at else "")
                for i in range(max(0, at - 24), min(len(mw), at + 8))))
        for w in k.get("windows", [])[:6]:
            raw = (root / w["blob"]).read_bytes()
            words = [int(x) for x in np.frombuffer(raw, "<u4", len(raw) // 4)]
            hit = (w["cpu"] - w["window_cpu"]) // 4
            out.append(f"  window at {w['cpu']:#x} ({w['region']}): "
                       f"{SEND_METHODS.get(w['method'], hex(w['method']))}")
            out += ["    " + ln for ln in collapse_nops(sync_decode(words, hit))]
        for g in k.get("gp", [])[:MAX_GP]:
            out.append(f"  GPFIFO entry at {g['cpu']:#x} ({g['region']}): segment {g['va']:#x}, "
                       f"{g['dwords']} dwords" + (", as the CPU saw it:" if "segment_blob" in g
                                                   else ""))
            if "segment_blob" in g:
                raw = (root / g["segment_blob"]).read_bytes()
                words = [int(x) for x in np.frombuffer(raw, "<u4", len(raw) // 4)]
                out += ["    " + ln for ln in collapse_runs(collapse_nops(
                    decode_pushbuffer(words, {1: COMPUTE_CLASS}, limit=4096)))]
        for p in peeks:
            if p["kind"] == name and p["why"] == "segment" and "blob" in p:
                raw = (root / p["blob"]).read_bytes()
                words = [int(x) for x in np.frombuffer(raw, "<u4", len(raw) // 4)]
                out.append(f"  segment at {p['va']:#x} ({len(words)} dwords):")
                out += ["    " + ln for ln in collapse_nops(
                    decode_pushbuffer(words, {1: COMPUTE_CLASS}, limit=96))]
    bad = [p for p in peeks if "error" in p]
    if bad:
        out.append(f"reads that failed: {bad}")
    return out


# Fields that describe the kernel, the launch's shape or its addresses: what a QMD of another
# kernel cannot take from CUDA's (everything else describes how CUDA starts and orders grids).
CLONE_SKIP = ("ADDR", "POINTER", "PAYLOAD", "GRID_", "CTA_THREAD", "REGISTER_COUNT",
              "SHARED_MEMORY_SIZE", "SM_CONFIG", "BARRIER_COUNT", "SHADER_LOCAL_MEMORY",
              "CONSTANT_BUFFER_SIZE", "CONSTANT_BUFFER_VALID", "RELEASE", "SASS_VERSION",
              "QMD_MAJOR", "QMD_MINOR", "PROGRAM_ADDRESS", "PROGRAM_PREFETCH", "HW_ONLY",
              "INNER_", "OUTER_", "CIRCULAR_QUEUE", "CORRELATION_ID", "DEBUG_ID", "OCCUPANCY_",
              "TPC_DISABLE")


def clonable(name: str) -> bool:
    """Whether field `name` (as `QMD.decode` names it) describes how a grid is started and
    ordered, not the kernel, shape or addresses."""
    return not any(s in name for s in CLONE_SKIP)


def cuda_fields(root: Path) -> dict[str, dict[str, Any]]:
    """Per kind, the clonable fields of CUDA's QMDs of that kind's shape: "linked" (the most
    common among those that name a dependent QMD, else the most common of all) and "last" (the
    most common among those that do not), and how many QMDs there were."""
    man = json.loads((root / "manifest.json").read_text())
    out: dict[str, dict[str, Any]] = {}
    for name, k in man["kinds"].items():
        fs = [{n: v for n, v in f.items() if clonable(n)}
              for _, _, f in _qmds_of(root, man, name) if f.get("GRID_WIDTH") == k.get("grid")]
        if not fs:
            continue

        def common(group: list[dict[str, int]]) -> dict[str, int]:
            # the most frequent field set; among equals, the first seen (a set's order varies)
            keys = [tuple(sorted(f.items())) for f in group]
            return dict(Counter(keys).most_common(1)[0][0])

        linked = [f for f in fs if f.get("DEPENDENT_QMD_ENABLE(0)")]
        last = [f for f in fs if not f.get("DEPENDENT_QMD_ENABLE(0)")]
        out[name] = {"linked": common(linked or fs), "last": common(last or fs),
                     "count": len(fs), "linked_count": len(linked)}
    return out


def _raw_of(root: Path, man: dict[str, Any], name: str, label: str) -> bytes:
    """The bytes of QMD `label` (cpuN / gpuN) of kind `name`."""
    i = int(label[3:])
    if label.startswith("cpu"):
        rec = man["kinds"][name]["qmds"][i]
    else:
        rec = [x for x in man.get("peeks", []) if x["kind"] == name and x.get("is_qmd")][i]
    return (root / rec["blob"]).read_bytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sniff", type=Path, help="device: launch through CUDA, scan, write here")
    ap.add_argument("--ours", type=Path, help="device: this runtime's launches, scan, write here")
    ap.add_argument("--decode", type=Path, help="a folder --sniff wrote")
    ap.add_argument("--ours-dir", type=Path, help="with --decode: the folder --ours wrote")
    ap.add_argument("--cuda-fields", type=Path,
                    help="with --sniff or --decode: write CUDA's clonable QMD fields per kind "
                    "here (JSON, for scripts/probe_nv_deps.py --cuda-fields)")
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--time-reps", type=int, default=15)
    ap.add_argument("--max-peeks", type=int, default=600)
    args = ap.parse_args()
    if args.sniff:
        sniff(args.sniff, args.time_reps, args.max_peeks)
    if args.cuda_fields and (args.sniff or args.decode):
        args.cuda_fields.write_text(json.dumps(cuda_fields(args.sniff or args.decode), indent=1))
    if args.ours:
        sniff_ours(args.ours, args.device)
    if args.decode:
        print("\n".join(decode(args.decode, args.ours_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
