"""The main job's last step: run kernels on the best device present (the mock AMD GPU by default).

``python -m runtime.hcq.demo [DEVICE] [--n N]`` compiles a vector add and a saxpy for the device,
launches them through the hardware queues, checks the results against numpy and prints what ran
where and how long it took on the GPU clock.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from runtime.hcq import HCQError, open_device

_SOURCES = {
    "amd": """
__kernel void vadd(__global const float *a, __global const float *b, __global float *c, int n) {
  int i = get_global_id(0);
  if (i < n) c[i] = a[i] + b[i];
}
__kernel void saxpy(float alpha, __global const float *x, __global float *y, int n) {
  int i = get_global_id(0);
  if (i < n) y[i] = alpha * x[i] + y[i];
}
""",
    "nv": """
extern "C" __global__ void vadd(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void saxpy(float alpha, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] + y[i];
}
""",
}


def run(device: str | None, n: int) -> int:
    t0 = time.perf_counter()
    dev = open_device(device)
    try:
        vendor = "nv" if "nv" in dev.name.split(":")[0] else "amd"
        print(f"device: {dev.name}")
        lib = dev.compiler.compile(_SOURCES[vendor])
        vadd, saxpy = dev.program(lib, "vadd"), dev.program(lib, "saxpy")
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        ba, bb, bc = dev.alloc(a.nbytes), dev.alloc(b.nbytes), dev.alloc(a.nbytes)
        dev.copyin(ba, a)
        dev.copyin(bb, b)
        block = 256
        grid = (-(-n // block), 1, 1)
        t_add = vadd(ba, bb, bc, n, global_size=grid, local_size=(block, 1, 1), wait=True)
        c = np.empty_like(a)
        dev.copyout(c, bc)
        ok_add = np.array_equal(c, a + b)
        t_saxpy = saxpy(2.5, ba, bb, n, global_size=grid, local_size=(block, 1, 1), wait=True)
        y = np.empty_like(b)
        dev.copyout(y, bb)
        ok_saxpy = np.allclose(y, np.float32(2.5) * a + b, rtol=1e-6, atol=1e-6)
        for name, t, ok in (("vadd", t_add, ok_add), ("saxpy", t_saxpy, ok_saxpy)):
            print(f"  {name:<6} n={n:<8} {'ok' if ok else 'WRONG'}  GPU time {t * 1e6:9.1f} µs")
        print(f"demo: {'passed' if ok_add and ok_saxpy else 'FAILED'} in "
              f"{time.perf_counter() - t0:.2f} s")
        return 0 if ok_add and ok_saxpy else 1
    finally:
        dev.close()


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.hcq.demo", description=__doc__)
    ap.add_argument("device", nargs="?", default=None,
                    help="amd:N, nv:N or mock-amd:N (default: the best present)")
    ap.add_argument("--n", type=_positive, default=1 << 16, help="elements (default 65536)")
    args = ap.parse_args(argv)
    try:
        return run(args.device, args.n)
    except HCQError as e:
        print(f"demo: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
