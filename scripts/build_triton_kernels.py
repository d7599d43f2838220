#!/usr/bin/env python3
"""Compiles the Triton kernels the runtime's Triton loader is tested with, ahead of time and without
a GPU, for the H200 (cuda sm_90), the mock AMD GPU (hip gfx1100, wave32) and MI300 (hip gfx942,
wave64: Triton's own LLVM targets it, clang-16 cannot), and writes each as
the binary plus the metadata JSON `runtime.hcq.triton.save` writes (kernel name, the Triton
signature in order, constants, dynamic shared memory, warps, scratch sizes); CUDA kernels also get
their PTX beside the cubin (what the mock NVIDIA GPU executes).

    pip install "triton==3.6.*"
    python scripts/build_triton_kernels.py            # -> tests/runtime/data/triton/{sm90,gfx1100}
    python scripts/build_triton_kernels.py --targets sm90

For gfx942 only vector_add and matmul are built (the mock's gfx942 node loads and dispatches
kernels but does not execute CDNA3 code; matmul's MFMA accumulators give a non-trivial
ACCUM_OFFSET for the loader tests).

vector_add and softmax are also copied to runtime/hcq/examples/triton (shipped in the wheel for the
examples of docs/runtime.md; a test checks the copies equal these).

The outputs are committed, so tests need neither Triton nor a compiler. Kernels: vector add, fused
softmax, layer norm, matmul with tl.dot, dropout with tl.rand.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "runtime" / "data" / "triton"
EXAMPLES = ROOT / "runtime" / "hcq" / "examples" / "triton"
SHIPPED = ("vector_add", "softmax")
GFX942_KERNELS = ("vector_add", "matmul")


def kernels() -> dict[str, tuple[Any, dict[str, str], dict[str, Any]]]:
    """name -> (jit function, signature of its runtime arguments in order, constexprs)."""
    import triton
    import triton.language as tl

    @triton.jit
    def vector_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m),
                 mask=m)

    @triton.jit
    def softmax(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)

    @triton.jit
    def layer_norm(x_ptr, y_ptr, w_ptr, b_ptr, stride, n, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        m = cols < n
        x = tl.load(x_ptr + row * stride + cols, mask=m, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n
        d = tl.where(m, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
        w = tl.load(w_ptr + cols, mask=m)
        b = tl.load(b_ptr + cols, mask=m)
        tl.store(y_ptr + row * stride + cols, d * rstd * w + b, mask=m)

    @triton.jit
    def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :],
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :],
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    @triton.jit
    def dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        keep = tl.rand(seed, offs) > p
        tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=m)

    f32 = "*fp32"
    return {
        "vector_add": (vector_add, {"x_ptr": f32, "y_ptr": f32, "out_ptr": f32, "n": "i32"},
                       {"BLOCK": 256}),
        "softmax": (softmax, {"out_ptr": f32, "in_ptr": f32, "in_stride": "i32",
                              "out_stride": "i32", "n_cols": "i32"}, {"BLOCK": 128}),
        "layer_norm": (layer_norm, {"x_ptr": f32, "y_ptr": f32, "w_ptr": f32, "b_ptr": f32,
                                    "stride": "i32", "n": "i32", "eps": "fp32"}, {"BLOCK": 128}),
        "matmul": (matmul, {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": f32, "M": "i32",
                            "N": "i32", "K": "i32", "stride_am": "i32", "stride_bk": "i32",
                            "stride_cm": "i32"}, {"BM": 32, "BN": 32, "BK": 32}),
        "dropout": (dropout, {"x_ptr": f32, "out_ptr": f32, "n": "i32", "p": "fp32",
                              "seed": "i32"}, {"BLOCK": 256}),
        # `n` specialised to 1, as Triton's JIT does for an int argument equal to 1: the binary
        # has no such parameter and the loader drops it from the call.
        "vector_add_n1": (vector_add, {"x_ptr": f32, "y_ptr": f32, "out_ptr": f32, "n": "i32"},
                          {"BLOCK": 256, "n": 1}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--targets", nargs="+", choices=("sm90", "gfx1100", "gfx942"),
                    default=["sm90", "gfx1100", "gfx942"])
    args = ap.parse_args()
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from runtime.hcq.triton import save, spec_from_compiled
    targets = {"sm90": GPUTarget("cuda", 90, 32), "gfx1100": GPUTarget("hip", "gfx1100", 32),
               "gfx942": GPUTarget("hip", "gfx942", 64)}
    for tdir, target in targets.items():
        if tdir not in args.targets:
            continue
        for name, (fn, sig, consts) in kernels().items():
            if tdir == "gfx942" and name not in GFX942_KERNELS:
                continue
            full = dict(sig, **{k: "constexpr" for k in consts if k not in sig})
            k = triton.compile(ASTSource(fn=fn, signature=full, constexprs=consts), target=target)
            binary, spec = spec_from_compiled(k)
            ptx = k.asm["ptx"] if target.backend == "cuda" else None
            save(args.out / tdir / name, binary, spec, ptx)
            if name in SHIPPED and args.out == OUT and tdir != "gfx942":
                save(EXAMPLES / tdir / name, binary, spec, ptx)
            print(f"{tdir}/{name}: {len(binary)} B, shared {spec.shared} B, "
                  f"{spec.num_warps} warps, triton {triton.__version__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
