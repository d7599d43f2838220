"""scripts/sniff_cuda_launches.py, the tool that reads CUDA's QMDs and pushbuffers out of its own
process on the H200: its scanner (which mappings it reads, how it survives unreadable ones, QMDs at
any dword offset, method headers), the reads through a kernel that follow dependent links, and the
decoder, on synthetic memory and on this runtime's own launches on mock-nv (where every QMD of a
graph must be found and decoded), so that the device run is not the tool's first."""
from __future__ import annotations

import ctypes
import errno
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.drivers.nv.methods import SUBC_COMPUTE, nvm
from runtime.drivers.nv.qmd import QMDV04

from .script_util import loaded_script

@pytest.fixture(scope="module")
def sn() -> Iterator[ModuleType]:
    yield from loaded_script("sniff_cuda_launches")


MAPS = """\
00400000-00500000 r-xp 00000000 08:01 123 /usr/bin/python3
200000000-200010000 rw-s 00000000 00:05 77 /dev/nvidia0
200010000-200210000 rw-s 00000000 00:05 78 /dev/nvidia0
200400000-200600000 rw-s 00000000 00:05 79 /dev/nvidiactl
200600000-200800000 ---p 00000000 00:00 0
300000000-340000000 rw-s 00000000 00:05 80 /dev/nvidia-uvm
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
7f0000100000-7f0000200000 rw-p 00000000 00:00 0                          [heap]
7f0000200000-7f0000300000 rw-s 00000000 00:01 2650                       /dev/zero (deleted)
7f0000300000-7f0000400000 rw-p 00000000 08:01 124                        /usr/lib/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
7ffd00100000-7ffd00102000 r--p 00000000 00:00 0                          [vvar]
"""


def test_the_plan_reads_driver_mappings_first_and_skips_register_windows(sn):
    regions = sn.parse_maps(MAPS)
    assert len(regions) == 12 and regions[1].path == "/dev/nvidia0"
    plan = [(hex(r.start), why) for r, why in sn.scan_plan(regions)]
    assert plan == [("0x200010000", "driver"), ("0x200400000", "driver"),
                    ("0x7f0000000000", "anonymous"), ("0x7f0000100000", "anonymous"),
                    ("0x7f0000200000", "anonymous")]


def test_an_unreadable_chunk_reads_as_zeros_and_is_listed(sn):
    r = sn.Region(0x1000, 0x1000 + 3 * 256, "rw-s", 0, "/dev/nvidiactl")

    def read(addr: int, n: int) -> bytes:
        if addr == 0x1100:
            raise OSError(errno.EIO, "Input/output error")
        return bytes([addr >> 8 & 0xFF]) * n

    data, errs = sn.read_region(read, r, chunk=256)
    assert data == b"\x10" * 256 + bytes(256) + b"\x12" * 256
    assert errs == [(256, "Input/output error")]


def _qmd(grid: int, block: int = 96) -> QMDV04:
    q = QMDV04()
    q.set_common(sass_version=0x90)
    q.set_grid(grid, 1, 1)
    q.set_block(block, 1, 1)
    q.set_cbuf(0, 0x7000_0000, 0x200)
    return q


def test_qmds_are_found_at_any_dword_offset_by_shape(sn):
    rng = np.random.default_rng(1)
    data = bytearray(rng.integers(0, 256, 64 << 10, dtype=np.uint8).tobytes())
    at = {1004: _qmd(37), 20000: _qmd(41), 30000: _qmd(37, block=95), 40000: _qmd(38)}
    for off, q in at.items():
        data[off:off + QMDV04.size_B] = q.data
    assert sn.find_qmds(bytes(data), [37, 41]) == [(1004, 37), (20000, 41)]
    assert sn.find_qmds(bytes(data[:20100]), [41]) == []   # cut short: not a whole QMD


def test_send_methods_are_found_and_decoded_from_a_synchronised_start(sn):
    words = [0xFFFFFFFF, 0x12345678] + nvm(SUBC_COMPUTE, 0x0390, 1) \
        + nvm(SUBC_COMPUTE, sn.cl.NVCBC0_SEND_PCAS_A, 0x123456) \
        + nvm(SUBC_COMPUTE, sn.cl.NVCBC0_SEND_SIGNALING_PCAS2_B,
              sn.cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE) + [0] * 4
    data = np.asarray(words, np.uint32).tobytes()
    hits = sn.find_methods(data)
    assert [(h["offset"], h["method"], h["count"], h["data"]) for h in hits] == \
        [(16, sn.cl.NVCBC0_SEND_PCAS_A, 1, 0x123456)]
    assert sn.plausible_send(hits[0])
    # the same header followed by anything else is not taken for a send
    lone = sn.find_methods(np.asarray(words[:6] + [0x12345678, 0], np.uint32).tobytes())
    assert len(lone) == 1 and not sn.plausible_send(lone[0])
    lines = sn.sync_decode(words, 4)
    assert lines[0] == "(from dword -2)"
    assert "SEND_PCAS_A = 0x123456" in lines[2] and "SEND_SIGNALING_PCAS2_B" in lines[3]


class MockLib:
    """The helper's peek and error functions over mock-nv memory."""

    def __init__(self, mem: Any, fail_at: int | None = None) -> None:
        self.mem, self.fail_at, self.reads = mem, fail_at, []

    def sn_peek(self, va: Any, buf: Any, n: int) -> int:
        from runtime.drivers.mock.memory import PageFault
        va = va.value
        self.reads.append(va)
        if va == self.fail_at:
            return 700
        try:
            ctypes.memmove(buf, self.mem.read(va, n), n)
        except PageFault:
            return 700
        return 0

    def sn_error(self, e: int) -> bytes:
        return b"an illegal memory access was encountered"


def _mock_sniff(sn: Any, tmp: Path, fail_at: int | None = None) -> tuple[Any, MockLib]:
    """This runtime's graph and stream kinds on mock-nv, scanned from the mock's memory, then the
    reads through a (mock) kernel; the folder is what --sniff and --ours write."""
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.nv.device import NVDevice
    from runtime.hcq import Launch

    dev = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    mem = dev.os.nv.gpus[0].mem  # type: ignore[attr-defined]
    prg = dev.program(dev.compiler.compile(sn.OURS_SRC), "sniff_plain")
    x = dev.alloc(0x10000 * 4)
    # GPFIFO entries are looked for in the channel's ring only (on the device: driver mappings)
    ring = np.frombuffer(dev.compute_channel.ring, np.uint8).ctypes.data
    ring_map = next(m for m in mem.mappings()
                    if m.data.ctypes.data <= ring < m.data.ctypes.data + len(m.data))
    sink, seen = sn.Sink(tmp), {}
    sink.manifest["kinds"]["baseline"] = {}
    try:
        for k in sn.KINDS[:2]:
            gs, ls = (k.grid, 1, 1), (sn.BLOCK, 1, 1)
            if k.path == "graph":
                dev.graph([Launch(prg, (x, k.magic, i), gs, ls)
                           for i in range(sn.SNIFF_N)]).replay(wait=True)
            else:
                for i in range(sn.SNIFF_N):
                    prg(x, k.magic, i, global_size=gs, local_size=ls)
            dev.synchronize()
            regions = [(m.va, m.data.tobytes(), f"mock@{m.va:#x}") for m in mem.mappings()]
            f = sn.scan(k.name, [k.grid], [k.magic], regions, sink, seen,
                        gp_region=lambda name: name == f"mock@{ring_map.va:#x}",
                        segment_region=lambda name: True)
            sink.manifest["kinds"][k.name] = {**sn.asdict(k), **sn.asdict(f)}
        del sink.manifest["kinds"]["baseline"]
        sink.save()
        lib = MockLib(mem, fail_at)
        sn.peek_all(lib, sink, 600, trusted=lambda name: True)
        return sink, lib
    finally:
        dev.close()


def test_our_graph_and_stream_qmds_are_found_followed_and_decoded_on_mock_nv(sn, tmp_path):
    sink, lib = _mock_sniff(sn, tmp_path)
    kinds = sink.manifest["kinds"]
    graph = [QMDV04(bytearray((tmp_path / q["blob"]).read_bytes())) for q in kinds["graph"]["qmds"]]
    # every launch of the graph has its own QMD, linked to the next one
    assert len(graph) == sn.SNIFF_N and all(q.get("GRID_WIDTH") == 37 for q in graph)
    links = sum(1 for q in graph if q.get("DEPENDENT_QMD_ENABLE", 0))
    assert links == sn.SNIFF_N - 1
    assert kinds["stream"]["qmds"] and all(q["grid"] == 41 for q in kinds["stream"]["qmds"])
    # the launches' arguments were seen in their constant banks, the sends in the pushbuffer
    assert kinds["graph"]["magic"] and kinds["stream"]["magic"]
    assert any(w["method"] == sn.cl.NVCBC0_SEND_PCAS_A for w in kinds["stream"]["windows"])
    # the reads followed every dependent link and read every constant bank
    peeks = sink.manifest["peeks"]
    assert not any("error" in p for p in peeks)
    dep = [p for p in peeks if p["why"].startswith("dependent")]
    assert len(dep) == sn.SNIFF_N - 1 and all(p["is_qmd"] and p["grid"] == 37 for p in dep)
    cb = [p for p in peeks if p["why"].startswith("cbuf0") and p["kind"] == "graph"]
    assert len(cb) == sn.CBUFS_PER_KIND and all(p["blob"] for p in cb)
    # the stream's GPFIFO entries were found, their segments read, and the QMDs they send
    gp = kinds["stream"]["gp"]
    assert len(gp) == sn.SNIFF_N and kinds["graph"]["gp"]
    # each segment as the CPU saw it when its kind ran
    for g in gp:
        words = np.frombuffer((tmp_path / g["segment_blob"]).read_bytes(), "<u4")
        assert len(words) == g["dwords"]
        sends = sn.find_methods(words.tobytes())
        assert any(h["method"] == sn.cl.NVCBC0_SEND_PCAS_A for h in sends)
    segs = [p for p in peeks if p["why"] == "segment"]
    assert {p["va"] for p in segs} >= {g["va"] for g in gp}
    sent = {h["data"] << 8 for p in segs
            for h in sn.find_methods((tmp_path / p["blob"]).read_bytes())
            if h["method"] == sn.cl.NVCBC0_SEND_PCAS_A}
    read = {p["va"] for p in peeks if p.get("is_qmd")}
    assert len(sent) >= sn.SNIFF_N and sent <= read
    report = "\n".join(sn.decode(tmp_path, tmp_path))
    assert "=== graph: grid 37" in report and "=== stream: grid 41" in report
    assert "DEPENDENT_QMD0_POINTER" in report and "GRID_WIDTH" in report
    assert "SEND_PCAS_A" in report and "ours" in report and "segment at" in report
    assert "as the CPU saw it:" in report


def test_runs_of_inline_data_are_collapsed(sn):
    lines = ["sc1 NVCBC0 LAUNCH_DMA = 0x41", *["sc1 NVCBC0 LOAD_INLINE_DATA = 0x0"] * 5,
             "sc1 NVCBC0 SEND_PCAS_A = 0x1"]
    assert sn.collapse_runs(lines) == ["sc1 NVCBC0 LAUNCH_DMA = 0x41",
                                       "sc1 NVCBC0 LOAD_INLINE_DATA = 0x0",
                                       "... and 4 more LOAD_INLINE_DATA",
                                       "sc1 NVCBC0 SEND_PCAS_A = 0x1"]


def test_only_runs_of_gpfifo_entries_are_read(sn):
    e = [{"cpu": 0x1000, "va": 0x2000_0000}, {"cpu": 0x1008, "va": 0x2000_0100},
         {"cpu": 0x1010, "va": 0x7f_0000_0000}, {"cpu": 0x2000, "va": 0x2000_0200}]
    assert [x["cpu"] for x in sn.gp_clusters(e)] == [0x1000, 0x1008]
    from runtime.drivers.nv.methods import gp_entry
    u = np.zeros(8, np.uint64)
    u[1], u[2] = gp_entry(0x2000_0040, 12), gp_entry(0x2000_0100, 4) | 1 << 40  # PRIV set
    assert sn.find_gp_entries(u.tobytes()) == [(8, 0x2000_0040, 12)]


def test_a_failed_read_stops_the_reads_and_is_recorded(sn, tmp_path):
    sink, lib = _mock_sniff(sn, tmp_path / "a")
    first = sink.manifest["peeks"][0]["va"]
    sink2, lib2 = _mock_sniff(sn, tmp_path / "b", fail_at=first)
    assert lib2.reads == [first]
    assert sink2.manifest["peeks"][0]["error"].startswith("CUDA error 700")
    assert "reads that failed" in "\n".join(sn.decode(tmp_path / "b", None))


def test_the_scan_reads_this_process_through_proc_self_mem(sn, tmp_path):
    """The device path end to end on this machine's own memory: a QMD in an anonymous mapping of
    this process is found by reading /proc/self/mem (the pread path the H200 run takes)."""
    import mmap
    m = mmap.mmap(-1, 1 << 20)
    try:
        q = _qmd(59)
        m[0x1234 * 4:0x1234 * 4 + QMDV04.size_B] = bytes(q.data)
        base = np.frombuffer(m, np.uint8).ctypes.data
        # the mapping is one the scan reads (only it is read here: a process that ran many tests
        # has more memory than one scan reads in its time)
        plan = [(r, why) for r, why in sn.scan_plan(sn.parse_maps(Path("/proc/self/maps")
                                                                  .read_text()))
                if r.start <= base < r.end]
        assert plan
        errors: list[str] = []
        f = sn.scan("probe", [59], [], sn.proc_mem_regions(plan, errors), sn.Sink(tmp_path), {})
        assert [x["cpu"] for x in f.qmds] == [base + 0x1234 * 4]
        assert f.scanned_B >= 1 << 20 and not errors
    finally:
        m.close()


def test_cuda_fields_keep_what_orders_grids_and_drop_the_kernels(sn, tmp_path):
    sink, _ = _mock_sniff(sn, tmp_path)
    fields = sn.cuda_fields(tmp_path)
    g = fields["graph"]
    assert g["count"] >= sn.SNIFF_N and g["linked_count"] >= sn.SNIFF_N - 1
    assert g["linked"]["DEPENDENT_QMD_ENABLE(0)"] == 1
    assert "DEPENDENT_QMD_ENABLE(0)" not in g["last"]
    assert g["linked"]["CWD_MEMBAR_TYPE"] == QMDV04.value("CWD_MEMBAR_TYPE_L1_MEMBAR")
    assert g["linked"]["CWD_MEMBAR_TASK_CHASING_ENABLE"] == 1
    assert g["last"]["CWD_MEMBAR_TYPE"] == QMDV04.value("CWD_MEMBAR_TYPE_L1_SYSMEMBAR")
    for f in (g["linked"], g["last"], fields["stream"]["linked"]):
        assert not {n for n in f if any(s in n for s in ("GRID", "REGISTER", "ADDR", "POINTER",
                                                         "SHARED_MEMORY_SIZE", "PROGRAM_A"))}
        assert f["QMD_TYPE"] == QMDV04.value("QMD_TYPE_GRID_CTA")
