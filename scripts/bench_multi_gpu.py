#!/usr/bin/env python3
"""GPU-to-GPU copies on two NVIDIA GPUs: this runtime's `transfer` (peer and host-bounce paths)
beside PyTorch (`tensor.to("cuda:1")`) and CuPy (`cudaMemcpyPeer`), in one run. Prints a table and
writes JSON.

Figures, GPU 0 -> GPU 1, for 1 MiB to 1 GiB: bandwidth (best of N, wall clock from submission to
the destination seeing the bytes, as the peers are timed: call, then synchronize), and the latency
of a 4-byte copy (median of many). Targets: bandwidth >= 90% of the better peer at every
size from 1 MiB; 4-byte latency no worse than the better peer. CUDA runs first, in a subprocess, so
that libcuda and this runtime never share a process.

    python scripts/bench_multi_gpu.py [--quick] [--json bench_multi_gpu.json]

Exit status: 0 when every target is met, 1 when one is missed, 3 when it cannot run here (fewer
than two NVIDIA GPUs: the line says so, and the JSON records why).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MiB = 1 << 20
SIZES = [1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB]
NOT_RUN = 3

# The peers, in a subprocess: {"torch": {size: seconds, "lat4": s, ...}, "cupy": {...}}.
_PEERS = r'''
import json, statistics, sys, time
sizes, reps, lat_n = json.loads(sys.argv[1])
out = {}
try:
    import torch
    a = {n: torch.empty(n, dtype=torch.uint8, device="cuda:0") for n in sizes}
    for d in (0, 1):
        torch.cuda.synchronize(d)
    res = {}
    for n in sizes:
        best = []
        for _ in range(reps):
            t = time.perf_counter(); b = a[n].to("cuda:1"); torch.cuda.synchronize(1)
            best.append(time.perf_counter() - t)
            del b
        res[str(n)] = min(best)
    x = torch.zeros(1, dtype=torch.int32, device="cuda:0")
    lat = []
    for _ in range(lat_n):
        t = time.perf_counter(); y = x.to("cuda:1"); torch.cuda.synchronize(1)
        lat.append(time.perf_counter() - t)
    res["lat4"] = statistics.median(lat)
    res["version"] = torch.__version__
    out["torch"] = res
except Exception as e:
    out["torch_error"] = repr(e)
try:
    import cupy as cp
    rt = cp.cuda.runtime
    with cp.cuda.Device(0):
        try:
            rt.deviceEnablePeerAccess(1)
        except cp.cuda.runtime.CUDARuntimeError:
            pass
        src = {n: cp.empty(n, dtype=cp.uint8) for n in sizes + [4]}
    with cp.cuda.Device(1):
        try:
            rt.deviceEnablePeerAccess(0)
        except cp.cuda.runtime.CUDARuntimeError:
            pass
        dst = {n: cp.empty(n, dtype=cp.uint8) for n in sizes + [4]}
    def sync():
        for d in (0, 1):
            with cp.cuda.Device(d):
                rt.deviceSynchronize()
    sync()
    res = {}
    for n in sizes + [4]:
        best = []
        for _ in range(reps if n != 4 else lat_n):
            t = time.perf_counter()
            rt.memcpyPeer(dst[n].data.ptr, 1, src[n].data.ptr, 0, n)
            sync()
            best.append(time.perf_counter() - t)
        res[str(n) if n != 4 else "lat4"] = min(best) if n != 4 else statistics.median(best)
    res["version"] = cp.__version__
    out["cupy"] = res
except Exception as e:
    out["cupy_error"] = repr(e)
print("JSON" + json.dumps(out))
'''


def _peers(sizes: list[int], reps: int, lat_n: int) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-c", _PEERS, json.dumps([sizes, reps, lat_n])],
                       capture_output=True, text=True, timeout=600)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("JSON")), "")
    return json.loads(line[4:]) if line else {"error": (r.stderr or r.stdout)[-2000:]}


def _ours(sizes: list[int], reps: int, lat_n: int) -> dict[str, Any]:
    from runtime.hcq import TransferPath, open_devices, transfer
    d0, d1 = open_devices("nv:0", "nv:1")
    out: dict[str, Any] = {"peer_access": d0.peer_access(d1)}
    try:
        for path in (TransferPath.PEER, TransferPath.HOST_BOUNCE):
            if path is TransferPath.PEER and out["peer_access"] is not None:
                continue
            res: dict[str, float] = {}
            for n in sizes + [4]:
                a, b = d0.alloc(n), d1.alloc(n)
                d0.copyin(a, bytes(min(n, 4096)))
                transfer(b, a, n, path=path)   # first use maps the buffers; not timed
                d1.synchronize()
                d0.synchronize()
                times = []
                for _ in range(reps if n != 4 else lat_n):
                    t = time.perf_counter()
                    transfer(b, a, n, path=path)
                    d1.timeline_signal.wait(d1.timeline_value)   # the destination sees the bytes
                    times.append(time.perf_counter() - t)
                res[str(n) if n != 4 else "lat4"] = min(times) if n != 4 else \
                    statistics.median(times)
                d0.synchronize()
                d0.free(a)
                d1.free(b)
            out[path.value] = res
    finally:
        d1.close()
        d0.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--json", default="bench_multi_gpu.json", help="where to write the results")
    args = ap.parse_args(argv)
    from runtime.drivers.nv.probe import count_gpus
    from runtime.hcq.seam import RealOS
    gpus = count_gpus(RealOS())
    meta = {"host": platform.node(), "python": platform.python_version(), "nvidia_gpus": gpus}
    if gpus < 2:
        msg = f"not run: needs two NVIDIA GPUs, this machine has {gpus}"
        print(f"bench_multi_gpu: {msg}")
        Path(args.json).write_text(json.dumps({"meta": meta, "skipped": msg}, indent=1))
        return NOT_RUN
    reps, lat_n = (3, 200) if args.quick else (7, 2000)
    peers = _peers(SIZES, reps, lat_n)
    ours = _ours(SIZES, reps, lat_n)
    torch_, cupy = peers.get("torch", {}), peers.get("cupy", {})
    for k in ("torch_error", "cupy_error", "error"):
        if k in peers:
            print(f"  {k}: {peers[k]}")
    if ours["peer_access"] is not None:
        print(f"  no peer access between nv:0 and nv:1: {ours['peer_access']}")
    mine = ours.get("peer") or ours["host-bounce"]
    ok = True
    print(f"{'size':>10} {'ours GB/s':>10} {'bounce':>8} {'torch':>8} {'cupy':>8}  target")
    for n in SIZES:
        def gbs(d: dict[str, Any]) -> float:
            t = d.get(str(n))
            return n / t / 1e9 if t else 0.0
        best_peer = max(gbs(torch_), gbs(cupy))
        met = gbs(mine) >= 0.9 * best_peer
        ok &= met
        print(f"{n // MiB:>7} MiB {gbs(mine):>10.2f} {gbs(ours.get('host-bounce', {})):>8.2f} "
              f"{gbs(torch_):>8.2f} {gbs(cupy):>8.2f}  >= 90% of {best_peer:.2f}: "
              f"{'ok' if met else 'MISSED'}")
    peer_lat = [x for x in (torch_.get("lat4"), cupy.get("lat4")) if x]
    lat_ok = bool(peer_lat) and mine["lat4"] <= min(peer_lat)
    ok &= lat_ok
    print(f"4-byte copy latency: ours {mine['lat4'] * 1e6:.1f} us, torch "
          f"{(torch_.get('lat4') or 0) * 1e6:.1f} us, cupy {(cupy.get('lat4') or 0) * 1e6:.1f} us:"
          f" {'ok' if lat_ok else 'MISSED'}")
    meta.update(torch=torch_.get("version"), cupy=cupy.get("version"))
    Path(args.json).write_text(json.dumps({"meta": meta, "ours": ours, "peers": peers,
                                           "targets_met": ok}, indent=1))
    print(f"wrote {args.json}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
