#!/usr/bin/env python3
"""Builds the real-compiler code objects the RDNA3 interpreter tests run (tests/runtime/
test_rdna3_real.py). Re-run after changing a kernel; the outputs are committed so CI needs
neither Triton nor clang.

  triton/NAME.hsaco + triton/NAME.json   Triton 3.6, compiled ahead of time for gfx1100 wave32
                                         (`pip install "triton==3.6.*"`; no GPU needed), on its
                                         default buffer-op path: every pointer argument carries
                                         the specialisation a launch with a (< 2 GiB, 16-byte
                                         aligned) tensor gives it (tt.pointer_range 32,
                                         tt.divisibility 16). The JSON keeps the metadata a
                                         launcher needs: kernel name, dynamic LDS
                                         (`shared`), warps, argument signature.
  clang/NAME_O{0,2,3}.hsaco              tests/runtime/kernels_amd/NAME.cl with clang-16 at each
                                         -O level (the AMDCompiler flags the runtime uses)
  clang/NAME_w64.hsaco                   the same at -O2 with -mwavefrontsize64
  clang/NAME_{w32,w64}_O{0,1,2,3,s}.hsaco the kernels of FULL_MATRIX at every -O level in both
                                         wave sizes (instead of the three files above)

    python tests/runtime/data/rdna3_real/build.py [--triton-only | --clang-only] [--kernels NAME ...]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
CL_DIR = ROOT / "tests" / "runtime" / "kernels_amd"
WAVE64 = ("vadd_f32", "reduce_lds", "atomics", "branches", "partial_wave")
# Kernels whose bugs showed at one -O level or in one wave size only: built in every combination.
FULL_MATRIX = ("bpermute_scan", "call_helper", "cas_hist", "dyn_lds", "xlane_ops")
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os")


def build_triton() -> None:
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

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
        rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
        w = tl.load(w_ptr + cols, mask=m)
        b = tl.load(b_ptr + cols, mask=m)
        tl.store(y_ptr + row * stride + cols, d * rstd * w + b, mask=m)

    @triton.jit
    def matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
        tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc,
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    @triton.jit
    def row_sum(x_ptr, out_ptr, stride, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=0.0)
        tl.store(out_ptr + row, tl.sum(x, axis=0))

    @triton.jit
    def row_argmax(x_ptr, val_ptr, idx_ptr, stride, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n, other=-float("inf"))
        v, i = tl.max(x, axis=0, return_indices=True)
        tl.store(val_ptr + row, v)
        tl.store(idx_ptr + row, i)

    @triton.jit
    def dropout(x_ptr, out_ptr, n, p, seed, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m)
        keep = tl.rand(seed, offs) > p
        tl.store(out_ptr + offs, tl.where(keep, x / (1 - p), 0.0), mask=m)

    cases = {
        "vector_add": (vector_add, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                    "n": "i32"}, {"BLOCK": 1024}, 4),
        "softmax": (softmax, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32",
                              "out_stride": "i32", "n_cols": "i32"}, {"BLOCK": 256}, 4),
        "layer_norm": (layer_norm, {"x_ptr": "*fp32", "y_ptr": "*fp32", "w_ptr": "*fp32",
                                    "b_ptr": "*fp32", "stride": "i32", "n": "i32",
                                    "eps": "fp32"}, {"BLOCK": 256}, 4),
        "matmul_f16": (matmul, _mm_sig("fp16"), {"BM": 32, "BN": 32, "BK": 32}, 4),
        "matmul_f32": (matmul, _mm_sig("fp32"), {"BM": 32, "BN": 32, "BK": 16}, 4),
        "row_sum": (row_sum, {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride": "i32",
                              "n": "i32"}, {"BLOCK": 512}, 4),
        "row_argmax": (row_argmax, {"x_ptr": "*fp32", "val_ptr": "*fp32", "idx_ptr": "*i32",
                                    "stride": "i32", "n": "i32"}, {"BLOCK": 256}, 4),
        "dropout": (dropout, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "p": "fp32",
                              "seed": "i32"}, {"BLOCK": 1024}, 4),
    }
    out = HERE / "triton"
    out.mkdir(exist_ok=True)
    for name, (fn, sig, consts, warps) in cases.items():
        full_sig = dict(sig, **{k: "constexpr" for k in consts})
        # What a launch with tensors gives each pointer argument: 16-byte alignment and, for
        # tensors below 2 GiB, the 32-bit range that turns on buffer loads and stores.
        attrs = {(i,): [["tt.divisibility", 16], ["tt.pointer_range", 32]]
                 for i, t in enumerate(sig.values()) if t.startswith("*")}
        src = ASTSource(fn=fn, signature=full_sig, constexprs=consts, attrs=attrs)
        k = triton.compile(src, target=GPUTarget("hip", "gfx1100", 32),
                           options={"num_warps": warps})
        (out / f"{name}.hsaco").write_bytes(k.asm["hsaco"])
        meta = {"name": k.metadata.name, "shared": k.metadata.shared,
                "num_warps": k.metadata.num_warps, "warp_size": k.metadata.warp_size,
                "signature": sig, "constexprs": consts, "triton": triton.__version__}
        (out / f"{name}.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        print(f"triton {name}: {len(k.asm['hsaco'])} B, shared {k.metadata.shared}")


def _mm_sig(dt: str) -> dict[str, str]:
    sig = {"a_ptr": f"*{dt}", "b_ptr": f"*{dt}", "c_ptr": "*fp32"}
    sig.update({k: "i32" for k in ("M", "N", "K", "sam", "sak", "sbk", "sbn", "scm", "scn")})
    return sig


def build_clang(only: list[str] | None = None) -> None:
    sys.path.insert(0, str(ROOT))
    from runtime.drivers.amd.compiler import AMDCompiler
    out = HERE / "clang"
    out.mkdir(exist_ok=True)
    for cl in sorted(CL_DIR.glob("*.cl")):
        if only and cl.stem not in only:
            continue
        src = cl.read_text()
        if cl.stem in FULL_MATRIX:
            for wave, extra in (("w32", ()), ("w64", ("-mwavefrontsize64",))):
                for opt in OPT_LEVELS:
                    co = AMDCompiler(opt=opt, extra_args=extra).compile(src)
                    (out / f"{cl.stem}_{wave}_{opt[1:]}.hsaco").write_bytes(co)
            print(f"clang {cl.stem} (every -O level, wave32 and wave64)")
            continue
        for opt in ("-O0", "-O2", "-O3"):
            (out / f"{cl.stem}_{opt[1:]}.hsaco").write_bytes(AMDCompiler(opt=opt).compile(src))
        if cl.stem in WAVE64:
            co = AMDCompiler(extra_args=("-mwavefrontsize64",)).compile(src)
            (out / f"{cl.stem}_w64.hsaco").write_bytes(co)
        print(f"clang {cl.stem}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton-only", action="store_true")
    ap.add_argument("--clang-only", action="store_true")
    ap.add_argument("--kernels", nargs="+", help="only these kernels_amd/*.cl (implies --clang-only)")
    a = ap.parse_args()
    if not a.clang_only and not a.kernels:
        build_triton()
    if not a.triton_only:
        build_clang(a.kernels)


if __name__ == "__main__":
    main()
