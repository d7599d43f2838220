#!/usr/bin/env python3
"""Runs one gfx1100 code object on tinygrad's RDNA3 emulator (test/mockgpu/amd/emu.py `run_asm`),
for side-by-side checks and benchmarks against the mock GPU's interpreter on the same code object.

    python scripts/rdna3_peer.py TINYGRAD_DIR JOB.npz          # prints one JSON line
    python scripts/rdna3_peer.py TINYGRAD_DIR JOB.npz --count  # one run, counted by callgrind
    python scripts/rdna3_peer.py TINYGRAD_DIR --serve          # jobs from stdin, one per line

JOB.npz holds `code` (the code object bytes), `meta` (JSON: kernel, grid, block, args, repeats,
dynamic_lds_B) and one array per buffer argument (`buf0`, `buf1`, ...; the args list names them).
Buffers are passed by host pointer (the emulator addresses host memory directly); after a warm-up
run and the timed runs (each from the job's buffers) the script writes them back as OUT.npz beside
the job and prints the timings (best wall and CPU time, median wall time, every run's). With
--serve it keeps each job it has seen loaded and warmed up and answers lines `JOB.npz RUNS` on
stdin (so a benchmark can alternate with it run by run); with --count it makes one run, after
the warm-up, inside scripts/callgrind_region.py's counted region. It runs in its own
process because the emulator changes global floating-point state (MXCSR) and imports tinygrad.
Only this repository's ELF parser is used for the code object; the emulator is run, not copied.
"""
import argparse
import json
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


class Job:
    """One job file loaded into the emulator: its buffers, kernel arguments and dispatch packet,
    warmed up (the emulator compiles each instruction on first use)."""

    def __init__(self, job_path: Path) -> None:
        from runtime.drivers.amd import elf
        # tinygrad's emulator, from the checkout main() puts on sys.path (TINYGRAD_DIR): no
        # module mypy can find
        from test.mockgpu.amd import emu  # type: ignore[import-not-found]  # noqa: E402

        self.path = job_path
        job = np.load(job_path)
        meta = json.loads(str(job["meta"]))
        self.repeats = int(meta.get("repeats", 1))
        co = elf.parse(job["code"].tobytes())
        k = co.kernels[meta["kernel"]]
        image = np.frombuffer(co.image(), dtype=np.uint8).copy()
        bufs = {name: job[name].copy() for name in job.files if name.startswith("buf")}
        gx, gy, gz = meta["grid"]
        lx, ly, lz = meta["block"]
        # Kernel arguments at their metadata offsets; buffers as host pointers.
        kernarg = bytearray(max(k.kernarg_size, 8) + 256)
        explicit = [a for a in k.metadata.get(".args", [])
                    if not a[".value_kind"].startswith("hidden_")]
        for a, v in zip(explicit, meta["args"]):
            off, size = int(a[".offset"]), int(a[".size"])
            if isinstance(v, str):
                val = bufs[v].ctypes.data
            elif isinstance(v, float):
                kernarg[off:off + size] = struct.pack("<f" if size == 4 else "<d", v)
                continue
            else:
                val = int(v) & ((1 << (8 * size)) - 1)
            kernarg[off:off + size] = val.to_bytes(size, "little")
        ka = np.frombuffer(bytes(kernarg), dtype=np.uint8).copy()
        pkt = np.zeros(64, np.uint8)
        # hsa_kernel_dispatch_packet_t: header, setup (dimensions), workgroup size, reserved,
        # grid size in work-items (what code object v4 kernels read their sizes from)
        pkt[:24] = np.frombuffer(struct.pack("<HHHHHHIII", 2, 3, lx, ly, lz, 0, gx * lx,
                                             gy * ly, gz * lz), np.uint8)
        layout = k.kd.user_sgpr_layout()
        user = [0] * k.kd.user_sgpr_count
        queue = np.zeros(256, np.uint8)
        for key, ptr in (("dispatch_ptr", pkt.ctypes.data), ("queue_ptr", queue.ctypes.data),
                         ("kernarg_segment_ptr", ka.ctypes.data)):
            if key in layout:
                user[layout[key]], user[layout[key] + 1] = ptr & 0xFFFFFFFF, ptr >> 32
        lds = k.group_segment_size + int(meta.get("dynamic_lds_B", 0))
        rsrc2 = (k.kd.rsrc2 & ~(0x1FF << 15)) | (-(-lds // 512) << 15)
        entry = image.ctypes.data + k.entry_vaddr
        # (kept: the emulator reads them through the pointers above)
        self._keep = (image, ka, pkt, queue)
        self.bufs = bufs
        self.pristine = {name: v.copy() for name, v in bufs.items()}

        def run() -> None:
            emu.run_asm(entry, len(image) - k.entry_vaddr, gx, gy, gz, lx, ly, lz,
                        ka.ctypes.data, rsrc2, k.kd.private_segment_fixed_size, "rdna3", user)

        self._run = run
        self.run()   # warm-up

    def run(self) -> tuple[float, float]:
        """One run from the job's buffers (atomics accumulate): (wall, CPU) seconds."""
        for name, v in self.pristine.items():
            self.bufs[name][...] = v
        t0, c0 = time.perf_counter(), time.process_time()
        self._run()
        return time.perf_counter() - t0, time.process_time() - c0

    def runs(self, n: int) -> dict[str, Any]:
        """n runs; their times, and the buffers written back beside the job (OUT.npz)."""
        times, cpu = [], []
        for _ in range(n):
            t, c = self.run()
            times.append(t)
            cpu.append(c)
        np.savez(self.path.with_suffix(".out.npz"), **self.bufs)
        return {"best": min(times), "median": float(np.median(times)), "best_cpu": min(cpu),
                "times": times, "cpu": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tinygrad", type=Path, help="a tinygrad checkout")
    ap.add_argument("job", type=Path, nargs="?", help="the job file (not with --serve)")
    ap.add_argument("--serve", action="store_true",
                    help="read lines 'JOB.npz RUNS' from stdin, answer each with one JSON line")
    ap.add_argument("--count", action="store_true",
                    help="after the warm-up, one run inside callgrind_region.region()")
    args = ap.parse_args()
    if (args.job is None) != args.serve:
        ap.error("give a job file, or --serve")
    sys.path.insert(0, str(args.tinygrad))
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    if args.serve:
        jobs: dict[str, Job] = {}
        for line in sys.stdin:
            path, n = line.split()
            try:
                job = jobs.get(path)
                if job is None:
                    job = jobs[path] = Job(Path(path))
                answer = job.runs(int(n))
            except Exception as e:   # (the job's answer; the next job may run)
                answer = {"error": f"{type(e).__name__}: {e}"[:200]}
            print(json.dumps(answer), flush=True)
        return
    job = Job(args.job)
    if args.count:
        import callgrind_region   # (beside this script)
        with callgrind_region.region():
            job.run()
        np.savez(job.path.with_suffix(".out.npz"), **job.bufs)
        print(json.dumps({"counted_runs": 1}))
        return
    print(json.dumps(job.runs(job.repeats)))


if __name__ == "__main__":
    main()
