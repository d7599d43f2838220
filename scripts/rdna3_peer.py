#!/usr/bin/env python3
"""Runs one gfx1100 code object on tinygrad's RDNA3 emulator (test/mockgpu/amd/emu.py `run_asm`),
for side-by-side checks and benchmarks against the mock GPU's interpreter on the same code object.

    python scripts/rdna3_peer.py TINYGRAD_DIR JOB.npz      # prints one JSON line

JOB.npz holds `code` (the code object bytes), `meta` (JSON: kernel, grid, block, args, repeats,
dynamic_lds_B) and one array per buffer argument (`buf0`, `buf1`, ...; the args list names them).
Buffers are passed by host pointer (the emulator addresses host memory directly); after a warm-up
run and the timed runs (each from the job's buffers) the script writes them back as OUT.npz beside
the job and prints the timings (best wall and CPU time, median wall time). It runs in its own
process because the emulator changes global floating-point state (MXCSR) and imports tinygrad.
Only this repository's ELF parser is used for the code object; the emulator is run, not copied.
"""
import json
import struct
import sys
import time
from pathlib import Path

import numpy as np


def main() -> None:
    peer, job_path = Path(sys.argv[1]), Path(sys.argv[2])
    sys.path.insert(0, str(peer))
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
    from runtime.drivers.amd import elf
    from test.mockgpu.amd import emu  # noqa: E402  (tinygrad's emulator)

    job = np.load(job_path)
    meta = json.loads(str(job["meta"]))
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
    # hsa_kernel_dispatch_packet_t: header, setup (dimensions), workgroup size, reserved, grid
    # size in work-items (what code object v4 kernels read their sizes from)
    pkt[:24] = np.frombuffer(struct.pack("<HHHHHHIII", 2, 3, lx, ly, lz, 0, gx * lx, gy * ly,
                                         gz * lz), np.uint8)
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

    def run() -> None:
        emu.run_asm(entry, len(image) - k.entry_vaddr, gx, gy, gz, lx, ly, lz, ka.ctypes.data,
                    rsrc2, k.kd.private_segment_fixed_size, "rdna3", user)

    pristine = {k: v.copy() for k, v in bufs.items()}

    def reset() -> None:   # every run starts from the job's buffers (atomics accumulate)
        for k, v in pristine.items():
            bufs[k][...] = v

    run()   # warm-up: the emulator compiles each instruction on first use
    times, cpu = [], []
    for _ in range(int(meta.get("repeats", 1))):
        reset()
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    np.savez(job_path.with_suffix(".out.npz"), **bufs)
    print(json.dumps({"best": min(times), "median": float(np.median(times)),
                      "best_cpu": min(cpu)}))


if __name__ == "__main__":
    main()
