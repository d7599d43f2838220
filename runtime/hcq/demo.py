"""The main job's last step: run kernels on the best device present (the mock AMD GPU by default).

``python -m runtime.hcq.demo [DEVICE] [--n N]`` lists the devices this machine offers and what each
can run, then, on a device that executes kernels, compiles a vector add and a saxpy, launches them
through the hardware queues, checks the results against numpy and prints how long each took on the
GPU clock (both mocks execute kernels: the AMD one RDNA3 code, the NVIDIA one PTX). On a device
that does not execute kernel code it checks what it does model: copies through the copy engine and
completion signals.
``--list`` stops after the list.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from runtime.hcq import Device, HCQError, open_device, present_devices

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


# What each mock offers, for the list (real GPUs run everything).
_MOCKS = {
    "mock-amd:0": "kernels (RDNA3 interpreter), copies, signals, queues, graphs",
    "mock-nv:0": "kernels (PTX interpreter: NVRTC compiles to PTX for it), copies, signals, "
                 "queues, graphs",
}


def list_devices() -> None:
    """Prints the real GPUs present and the mocks, with what each can run."""
    present = present_devices()
    print("devices:")
    for name in present:
        print(f"  {name:<11} real GPU: kernels, copies, signals, queues, graphs")
    if not present:
        print("  (no NVIDIA or AMD GPU found: no /dev/nvidiactl + /dev/nvidia-uvm, no KFD GPU node)")
    for name, what in _MOCKS.items():
        print(f"  {name:<11} mock: {what}")


def run_kernels(dev: Device, n: int) -> bool:
    """vadd and saxpy on `dev`, checked against numpy."""
    vendor = "nv" if "nv" in dev.name.split(":")[0] else "amd"
    lib = dev.compile(_SOURCES[vendor])  # through the disk cache
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
    # A mock GPU's timestamps are taken around the emulator's run of the kernel: its time, not
    # a GPU's (the first launch includes the interpreter's start-up).
    clock = "interpreter time" if dev.properties.mock else "GPU time"
    for name, t, ok in (("vadd", t_add, ok_add), ("saxpy", t_saxpy, ok_saxpy)):
        assert t is not None  # a launch with wait=True returns its GPU time
        print(f"  {name:<6} n={n:<8} {'ok' if ok else 'WRONG'}  {clock} {t * 1e6:9.1f} µs")
    if dev.properties.mock:
        print("  (a mock GPU: times are the emulator's, not a GPU's; they say nothing about "
              "hardware speed)")
    return ok_add and ok_saxpy


def run_copies(dev: Device, n: int) -> bool:
    """What a device that does not execute kernels still models: host->device, device->device and
    device->host copies with their completion signals, checked byte for byte."""
    data = np.random.default_rng(0).integers(0, 256, size=4 * n, dtype=np.uint8)
    src, dst = dev.alloc(data.nbytes), dev.alloc(data.nbytes)
    dev.copyin(src, data)
    dev.transfer(dst, src, data.nbytes)
    out = np.empty_like(data)
    dev.copyout(out, dst)
    ok = np.array_equal(out, data)
    print(f"  copy   {data.nbytes} B host->GPU->GPU->host {'ok' if ok else 'WRONG'}; kernels skipped: "
          "this device does not execute kernel code")
    return ok


def run(device: str | None, n: int) -> int:
    t0 = time.perf_counter()
    dev = open_device(device)
    try:
        p = dev.properties
        print(f"device: {dev.name}: {p.name}, {p.compute_units} compute units, "
              f"{p.memory_B >> 20} MiB{' (mock)' if p.mock else ''}")
        ok = run_kernels(dev, n) if dev.executes_kernels else run_copies(dev, n)
        print(f"demo: {'passed' if ok else 'FAILED'} in {time.perf_counter() - t0:.2f} s")
        return 0 if ok else 1
    finally:
        dev.close()


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m runtime.hcq.demo", description=__doc__)
    ap.add_argument("device", nargs="?", default=None,
                    help="amd:N, nv:N, mock-amd:N or mock-nv:N (default: the best present)")
    ap.add_argument("--n", type=_positive, default=1 << 16, help="elements (default 65536)")
    ap.add_argument("--list", action="store_true", help="list the devices and stop")
    args = ap.parse_args(argv)
    list_devices()
    if args.list:
        return 0
    try:
        return run(args.device, args.n)
    except HCQError as e:
        print(f"demo: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
