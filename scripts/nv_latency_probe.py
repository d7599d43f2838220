"""Where a launch's time goes on a real NVIDIA GPU: variants of the launch commands side by side.

For each variant it times (a) the CPU's part, start of the launch to the doorbell store, and (b) the
GPU's round trip, doorbell to the completion value seen by the CPU (median of N), plus 1000
back-to-back launches with one wait. Variants drop or replace the ordering commands before
SEND_PCAS (semaphore acquire of the previous timeline value, shader cache invalidation, compute
WAIT_FOR_IDLE), change the PCAS action or the QMD's membar fields, and a host-only submission (no
kernel) gives the channel's floor. Diagnostic only: variants without ordering are not safe launches.

    python scripts/nv_latency_probe.py [--n 1000] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from array import array
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SRC = r"""
extern "C" __global__ void inc(unsigned *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1;
}
extern "C" __global__ void nop() {}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="nv:0")
    ap.add_argument("--only", default="", help="run the variants whose name contains this")
    args = ap.parse_args()

    import numpy as np
    from hcq_bindings.nv import classes as cl

    from runtime.drivers.nv.device import NVDevice
    from runtime.drivers.nv.gpfifo import SEM_ACQUIRE_GEQ_64, SEM_RELEASE_64, host_semaphore
    from runtime.drivers.nv.methods import SUBC_COMPUTE, fval, nvm

    dev = NVDevice(args.device)
    from runtime.drivers.nv.launcher import native_helper
    from runtime.hcq import native
    print("native launch:", "on" if dev.launch_native and native_helper() is not None
          else f"off ({native.unavailable})")
    lib = dev.compiler.compile(SRC)
    inc, nop = dev.program(lib, "inc"), dev.program(lib, "nop")
    x = dev.alloc(4096)
    dev.copyin(x, np.zeros(1024, np.uint32))
    tl, ch = dev.timeline_signal, dev.compute_channel
    arena = dev.kernarg_arena()
    qcls = dev.qmd_class
    A = cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_PREFETCH_COPY_SCHEDULE
    ACTIONS = {"IPCS": A, "PS": cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_PREFETCH_SCHEDULE,
               "ICS": cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION_INVALIDATE_COPY_SCHEDULE}

    def acq(v: int) -> list[int]:
        return host_semaphore(tl.va, v - 1, SEM_ACQUIRE_GEQ_64)

    inv = nvm(SUBC_COMPUTE, cl.NVCBC0_INVALIDATE_SHADER_CACHES_NO_WFI,
              dev.gen.compute.cache_invalidate)
    wfi = nvm(SUBC_COMPUTE, cl.NVCBC0_WAIT_FOR_IDLE, 0)

    def pcas(qmd_va: int, action: int) -> list[int]:
        return nvm(SUBC_COMPUTE, cl.NVCBC0_SEND_PCAS_A, qmd_va >> 8) + nvm(
            SUBC_COMPUTE, cl.NVCBC0_SEND_SIGNALING_PCAS2_B,
            fval(cl.NVCBC0_SEND_SIGNALING_PCAS2_B_PCAS_ACTION, action))

    def kernel_variant(prefix: Callable[[int], list[int]], action: int = A, prg=inc,
                       qmd_fields: dict | None = None) -> Callable[[], None]:
        kargs = (x, 1024) if prg is inc else ()
        gs, ls = ((4, 1, 1), (256, 1, 1)) if prg is inc else ((1, 1, 1), (32, 1, 1))

        def launch() -> None:
            va, view = arena.take(prg._block_B, 256)
            v = dev.timeline_value + 1
            qmd_va = prg.fill_fast(va, view, kargs, gs, ls, v)
            if qmd_fields:
                qo = qmd_va - va
                q = qcls(view[qo:qo + qcls.size_B])
                for k, val in qmd_fields.items():
                    q.set(k[0], val, k[1]) if isinstance(k, tuple) else q.set(k, val)
            dev.next_timeline()
            ch.submit_one(array("I", prefix(v) + pcas(qmd_va, action)))
        return launch

    def host_only() -> None:
        v = dev.next_timeline()
        ch.submit_one(array("I", host_semaphore(tl.va, v, SEM_RELEASE_64)))

    def hot() -> None:
        inc(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))

    inc_py = dev.program(lib, "inc")  # the same kernel, launched through the Python path
    native_on = dev.launch_native
    dev.launch_native = False
    inc_py(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))
    dev.launch_native = native_on
    dev.synchronize()

    def hot_py() -> None:
        inc_py(x, 1024, global_size=(4, 1, 1), local_size=(256, 1, 1))

    variants: list[tuple[str, Callable[[], None]]] = [
        ("hot path (launch slots; WFI when chained)", hot),
        ("hot path, Python launch", hot_py),
        ("host release only (no kernel)", host_only),
        ("acquire+invalidate+PCAS", kernel_variant(lambda v: acq(v) + inv)),
        ("invalidate+PCAS", kernel_variant(lambda v: inv)),
        ("acquire+PCAS", kernel_variant(acq)),
        ("PCAS only", kernel_variant(lambda v: [])),
        ("WFI+invalidate+PCAS", kernel_variant(lambda v: wfi + inv)),
        ("WFI+PCAS", kernel_variant(lambda v: wfi)),
        ("PCAS only, nop kernel 1x32", kernel_variant(lambda v: [], prg=nop)),
    ]
    for name, act in ACTIONS.items():
        if act != A:
            variants.append((f"invalidate+PCAS action {name}",
                             kernel_variant(lambda v: inv, action=act)))
    if qcls.__name__ == "QMDV04":
        variants += [
            ("invalidate+PCAS, CWD_MEMBAR L1_NONE",
             kernel_variant(lambda v: inv, qmd_fields={"CWD_MEMBAR_TYPE": 0})),
            ("invalidate+PCAS, CWD L1_NONE + RELEASE0 FE_SYSMEMBAR",
             kernel_variant(lambda v: inv, qmd_fields={"CWD_MEMBAR_TYPE": 0,
                                                       ("RELEASE_MEMBAR_TYPE", 0): 1})),
            ("invalidate+PCAS, CWD L1_MEMBAR + RELEASE0 FE_SYSMEMBAR",
             kernel_variant(lambda v: inv, qmd_fields={"CWD_MEMBAR_TYPE": 3,
                                                       ("RELEASE_MEMBAR_TYPE", 0): 1})),
            ("invalidate+PCAS, no QMD invalidate flags",
             kernel_variant(lambda v: inv, qmd_fields={
                 "INVALIDATE_TEXTURE_HEADER_CACHE": 0, "INVALIDATE_TEXTURE_SAMPLER_CACHE": 0,
                 "INVALIDATE_TEXTURE_DATA_CACHE": 0, "INVALIDATE_SHADER_DATA_CACHE": 0})),
        ]
    variants = [(n, f) for n, f in variants if args.only in n]
    rows = []
    u64 = tl._u64
    pc = time.perf_counter
    for name, launch in variants:
        try:
            for _ in range(100):
                launch()
            dev.synchronize(timeout_ms=2000)
        except Exception as e:  # noqa: BLE001 - a variant the GPU rejects ends the probe
            print(f"{name:52} FAILED: {str(e).splitlines()[0]}")
            break
        cpu, gpu, tot = [], [], []
        for _ in range(args.n):
            t0 = pc()
            launch()
            t1 = pc()
            want = dev.timeline_value
            while u64[0] < want:
                pass
            t2 = pc()
            cpu.append(t1 - t0)
            gpu.append(t2 - t1)
            tot.append(t2 - t0)
        dev.check_fault()
        best = 1e9
        for _ in range(5):
            t0 = pc()
            for _ in range(1000):
                launch()
            t1 = pc()
            dev.synchronize()
            best = min(best, pc() - t0)
            cpu_b2b = t1 - t0
        med = statistics.median
        row = {"variant": name, "cpu_us": med(cpu) * 1e6, "gpu_us": med(gpu) * 1e6,
               "total_med_us": med(tot) * 1e6, "total_min_us": min(tot) * 1e6,
               "b2b_ms": best * 1e3, "b2b_cpu_ms": cpu_b2b * 1e3}
        rows.append(row)
        print(f"{name:52} cpu {row['cpu_us']:6.2f}  gpu {row['gpu_us']:6.2f}  total "
              f"{row['total_med_us']:6.2f} (min {row['total_min_us']:5.2f}) us   1000 b2b "
              f"{row['b2b_ms']:6.3f} ms (cpu {row['b2b_cpu_ms']:6.3f})", flush=True)
    if dev._fault is None:
        out = np.zeros(1024, np.uint32)
        dev.copyout(out, x)
        print("inc result min/max", out.min(), out.max())
    dev.close()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
