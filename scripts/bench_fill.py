"""Copy-engine fills against copy-engine copies and cudaMemset, on a real NVIDIA GPU.

    python scripts/bench_fill.py [--device nv:0] [--json out.json]

Times `Device.fill` (a copy whose destination is remapped to a constant) and a VRAM-to-VRAM
`Device.transfer` of the same sizes on this runtime, then, in a process of its own (libcuda and this
runtime never share one), `cudaMemsetAsync` and a device-to-device `cudaMemcpyAsync` through CuPy.
Prints a table and writes JSON.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SIZES_MiB = (64, 256, 1024)
REPS = 5

_CUDA_REF = r"""
import json, time
out = {}
try:
    import cupy as cp
    for mib in SIZES:
        n = mib << 20
        a, b = cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)
        s = cp.cuda.Stream(non_blocking=True)
        def best(fn):
            r = []
            for _ in range(REPS):
                s.synchronize(); t = time.perf_counter(); fn(); s.synchronize()
                r.append(time.perf_counter() - t)
            return n / min(r) / 1e9
        best(lambda: cp.cuda.runtime.memsetAsync(a.data.ptr, 0, n, s.ptr))
        out[f"memset {mib}"] = best(lambda: cp.cuda.runtime.memsetAsync(a.data.ptr, 0, n, s.ptr))
        out[f"memcpy d2d {mib}"] = best(lambda: cp.cuda.runtime.memcpyAsync(
            b.data.ptr, a.data.ptr, n, cp.cuda.runtime.memcpyDeviceToDevice, s.ptr))
    out["version"] = cp.__version__
except Exception as e:
    out["error"] = repr(e)
print("JSON" + json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--json", default="bench_fill.json")
    ap.add_argument("--no-cuda", action="store_true", help="leave out the CUDA reference")
    args = ap.parse_args(argv)
    ref: dict = {}
    if not args.no_cuda:
        code = _CUDA_REF.replace("SIZES", repr(SIZES_MiB)).replace("REPS", str(REPS))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
        line = next((ln for ln in r.stdout.splitlines() if ln.startswith("JSON")), None)
        ref = json.loads(line[4:]) if line else {"error": (r.stderr or r.stdout)[-2000:]}
    from runtime.hcq import open_device
    dev = open_device(args.device)
    rows = []
    try:
        for mib in SIZES_MiB:
            n = mib << 20
            a, b = dev.alloc(n), dev.alloc(n)

            def best(fn: "object") -> float:
                r = []
                for _ in range(REPS):
                    dev.synchronize()
                    t = time.perf_counter()
                    fn()  # type: ignore[operator]
                    dev.synchronize()
                    r.append(time.perf_counter() - t)
                return n / min(r) / 1e9
            best(lambda: dev.fill(a, 0))
            fill = best(lambda: dev.fill(a, 0))
            fill32 = best(lambda: dev.fill(a, 0x3F800000, width=4))
            copy = best(lambda: dev.transfer(b, a, n))
            memset, memcpy = ref.get(f"memset {mib}", 0.0), ref.get(f"memcpy d2d {mib}", 0.0)
            rows.append({"MiB": mib, "fill GB/s": fill, "fill32 GB/s": fill32,
                         "copy d2d GB/s": copy, "cudaMemset GB/s": memset,
                         "cudaMemcpy d2d GB/s": memcpy,
                         "fill / copy": fill / copy if copy else 0.0,
                         "fill / cudaMemset": fill / memset if memset else 0.0})
            dev.free(a)
            dev.free(b)
    finally:
        dev.close()
    print(f"{'MiB':>6} {'fill':>8} {'fill32':>8} {'copy':>8} {'cudaMemset':>11} "
          f"{'cudaMemcpy':>11} {'fill/copy':>10} {'fill/memset':>12}   (GB/s)")
    for row in rows:
        print(f"{row['MiB']:>6} {row['fill GB/s']:>8.1f} {row['fill32 GB/s']:>8.1f} "
              f"{row['copy d2d GB/s']:>8.1f} {row['cudaMemset GB/s']:>11.1f} "
              f"{row['cudaMemcpy d2d GB/s']:>11.1f} {row['fill / copy']:>10.2f} "
              f"{row['fill / cudaMemset']:>12.2f}")
    if "error" in ref:
        print(f"CUDA reference: {ref['error'][:300]}")
    Path(args.json).write_text(json.dumps({"rows": rows, "cuda": ref}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
