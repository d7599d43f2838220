"""Triton kernels as programs (runtime.hcq.triton): Triton 3.6's own compiled kernels (committed,
built by scripts/build_triton_kernels.py) called with the Triton kernel's arguments, on the mock
AMD GPU against numpy, on the mock NVIDIA GPU (their PTX, through its PTX interpreter) against
numpy and for the launch layout, and on an H200 against PyTorch."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import ProgramError
from runtime.hcq.triton import HIDDEN_POINTERS, TritonSpec, load, load_triton

needs_gpu = pytest.mark.skipif(not (os.path.exists("/dev/nvidiactl") and
                                   os.path.exists("/dev/nvidia-uvm")),
                               reason="no NVIDIA GPU here (/dev/nvidiactl or /dev/nvidia-uvm)")
DATA = Path(__file__).parent / "data" / "triton"
KERNELS = ("vector_add", "softmax", "layer_norm", "matmul", "dropout", "vector_add_n1")


@pytest.fixture
def amd() -> Iterator[Any]:
    from runtime.drivers.amd.device import AMDDevice
    from runtime.drivers.mock.os import MockOS
    d = AMDDevice("mock-amd:0", os=MockOS.with_amd_gpus(1))
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


def _buf(d: Any, a: np.ndarray) -> Any:
    b = d.alloc(a.nbytes)
    d.copyin(b, a)
    return b


def _out(d: Any, b: Any, shape: Any, dt: Any) -> np.ndarray:
    o = np.zeros(shape, dt)
    d.copyout(o, b)
    return o


def run_suite(d: Any, tdir: Path, rng: np.random.Generator) -> dict[str, float]:
    """Runs every kernel on `d`; returns the max error of each against a numpy reference."""
    err: dict[str, float] = {}
    n = 1000
    x, y = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    add = load_triton(d, tdir / "vector_add")
    X, Y, O = _buf(d, x), _buf(d, y), d.alloc(4 * n)
    add(X, Y, O, n, grid=(-(-n // 256),), BLOCK=256)
    err["vector_add"] = float(np.abs(_out(d, O, n, np.float32) - (x + y)).max())
    R, C = 8, 100
    m = rng.standard_normal((R, C), dtype=np.float32)
    sm = load_triton(d, tdir / "softmax")
    I, SO = _buf(d, m), d.alloc(m.nbytes)
    sm(SO, I, C, C, C, grid=(R,))
    e = np.exp(m - m.max(1, keepdims=True))
    err["softmax"] = float(np.abs(_out(d, SO, (R, C), np.float32)
                                  - e / e.sum(1, keepdims=True)).max())
    ln = load_triton(d, tdir / "layer_norm")
    w, b = rng.standard_normal(C, dtype=np.float32), rng.standard_normal(C, dtype=np.float32)
    LY = d.alloc(m.nbytes)
    ln(I, LY, _buf(d, w), _buf(d, b), C, C, 1e-5, grid=(R,))
    mu = m.mean(1, keepdims=True)
    ref = (m - mu) / np.sqrt(m.var(1, keepdims=True) + 1e-5) * w + b
    err["layer_norm"] = float(np.abs(_out(d, LY, (R, C), np.float32) - ref).max())
    mm = load_triton(d, tdir / "matmul")
    M = N = K = 64
    a = rng.standard_normal((M, K)).astype(np.float16)
    bb = rng.standard_normal((K, N)).astype(np.float16)
    MC = d.alloc(M * N * 4)
    mm(_buf(d, a), _buf(d, bb), MC, M, N, K, K, N, N, grid=(M // 32, N // 32))
    err["matmul"] = float(np.abs(_out(d, MC, (M, N), np.float32)
                                 - a.astype(np.float32) @ bb.astype(np.float32)).max())
    do = load_triton(d, tdir / "dropout")
    DO = d.alloc(4 * n)
    do(X, DO, n, 0.5, 123, grid=(-(-n // 256),))
    r = _out(d, DO, n, np.float32)
    kept = r != 0
    assert 0.4 < kept.mean() < 0.6, kept.mean()
    err["dropout"] = float(np.abs(r[kept] - 2 * x[kept]).max())
    return err


def test_triton_kernels_on_the_mock_amd_gpu(amd: Any) -> None:
    err = run_suite(amd, DATA / "gfx1100", np.random.default_rng(0))
    assert err["vector_add"] == 0.0 and err["dropout"] <= 1e-6, err
    assert max(err.values()) < 1e-4, err
    block = amd.os.drivers[0].gpus[0].dispatches[-1].record.block
    assert block == (128, 1, 1)  # num_warps 4 x wave32


def test_triton_kernels_on_the_mock_nvidia_gpu() -> None:
    """The committed sm_90 kernels' PTX, run by the mock NVIDIA GPU's PTX interpreter."""
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.nv.device import NVDevice
    d = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    d.default_timeout_ms = 60_000.0
    try:
        err = run_suite(d, DATA / "sm90", np.random.default_rng(0))
        assert err["vector_add"] == 0.0 and err["dropout"] <= 1e-6, err
        assert max(err.values()) < 1e-4, err
        assert tuple(d.os.nv.gpus[0].launches[-1].block) == (128, 1, 1)  # type: ignore
    finally:
        d.close()


def test_every_committed_ptx_is_fully_supported() -> None:
    from runtime.drivers.mock.ptx.audit import audit
    for name in KERNELS:
        found, count = audit((DATA / "sm90" / f"{name}.ptx").read_text())
        assert count > 0 and found == [], (name, found)


def test_the_specs_match_their_binaries() -> None:
    for tdir in ("gfx1100", "sm90"):
        for name in KERNELS:
            binary, spec = load(DATA / tdir / name)
            assert spec.triton_version == "3.6.0" and spec.num_warps == 4
            assert spec.backend == ("cuda" if tdir == "sm90" else "hip") and binary
            assert TritonSpec.from_json(spec.to_json()) == spec


def test_specialised_and_constexpr_arguments_are_dropped(amd: Any) -> None:
    k = load_triton(amd, DATA / "gfx1100" / "vector_add_n1")
    assert [s.name for s in k.program.slots] == ["x_ptr", "y_ptr", "out_ptr", "global_scratch",
                                                 "profile_scratch"]
    x = np.arange(4, dtype=np.float32)
    X, Y, O = _buf(amd, x), _buf(amd, x), amd.alloc(16)
    k(X, Y, O, 1, grid=(1,))  # n is specialised to 1: passed as Triton users do, then dropped
    out = _out(amd, O, 4, np.float32)
    assert list(out) == [0.0, 0.0, 0.0, 0.0]  # 0 + 0, and only element 0 is written (n = 1)
    k(Y, Y, O, 1, grid=(1,))
    assert list(_out(amd, O, 4, np.float32)) == [0.0, 0.0, 0.0, 0.0]
    Z = _buf(amd, np.array([1.5, 2, 3, 4], np.float32))
    k(Z, Z, O, 1, grid=(1,))
    assert list(_out(amd, O, 4, np.float32)) == [3.0, 0.0, 0.0, 0.0]
    with pytest.raises(ProgramError, match="'n' was specialised to 1 at compile time, got 2"):
        k(X, Y, O, 2, grid=(1,))
    with pytest.raises(ProgramError, match="compiled with BLOCK=256, got 128"):
        k(X, Y, O, 1, grid=(1,), BLOCK=128)
    with pytest.raises(ProgramError, match=r"takes 4 arguments \(x_ptr, y_ptr, out_ptr, n\)"):
        k(X, Y, O, grid=(1,))
    add = load_triton(amd, DATA / "gfx1100" / "vector_add")
    with pytest.raises(ProgramError, match="argument 'n' is an integer, got the float"):
        add(X, Y, O, 4.0, grid=(1,))


def test_dynamic_lds_is_what_makes_the_kernel_work(amd: Any) -> None:
    """softmax reduces through 16 B of dynamic LDS (metadata.shared): the loader applies it;
    loaded without it, the first ds_store faults."""
    from runtime.hcq import DeviceFault
    binary, spec = load(DATA / "gfx1100" / "softmax")
    k = load_triton(amd, binary, spec)
    assert spec.shared == 16 and k.program.lds_B >= 16  # type: ignore[attr-defined]
    m = np.ones((2, 8), np.float32)
    I, O = _buf(amd, m), amd.alloc(m.nbytes)
    k(O, I, 8, 8, 8, grid=(2,), wait=True)
    assert np.allclose(_out(amd, O, (2, 8), np.float32), 1 / 8)
    bare = amd.program(binary, spec.name)
    with pytest.raises(DeviceFault, match="LDS|lds|ds_"):
        bare(O, I, 8, 8, 8, 0, 0, global_size=(2, 1, 1), local_size=(128, 1, 1), wait=True)


def test_a_kernel_for_the_other_vendor_is_refused(amd: Any) -> None:
    with pytest.raises(ProgramError, match="cuda Triton kernel cannot run on mock-amd"):
        load_triton(amd, DATA / "sm90" / "vector_add")


def test_the_nvidia_launch_layout_on_the_mock() -> None:
    """On the mock NVIDIA GPU (with a Python model in place of the kernel): the parameters land
    where the PTX's parameter layout says, the hidden pointers are null, the block is num_warps x 32 and the QMD carries the
    dynamic shared memory."""
    from runtime.drivers.mock.nv_rm import NvMockOS
    from runtime.drivers.nv.device import NVDevice
    d = NVDevice("mock-nv:0", os=NvMockOS.with_nv_gpus(1))
    try:
        k = load_triton(d, DATA / "sm90" / "softmax")
        seen: list[Any] = []
        d.os.nv.gpus[0].register_kernel(  # type: ignore[attr-defined]
            k.program.prog_va, seen.append)  # type: ignore[attr-defined]
        a, b = d.alloc(64), d.alloc(64)
        k(a, b, 3, 4, 5, grid=(2,), wait=True)
        launch = seen[-1]
        assert tuple(launch.block) == (128, 1, 1) and tuple(launch.grid) == (2, 1, 1)
        slots = {s.name: s for s in k.program.slots}
        assert launch.param(slots["out_ptr"].offset, "Q") == a.va
        assert launch.param(slots["in_ptr"].offset, "Q") == b.va
        assert [launch.param(slots[n].offset, "i") for n in ("in_stride", "out_stride",
                                                             "n_cols")] == [3, 4, 5]
        for h in ("global_scratch", "profile_scratch"):
            assert launch.param(slots[h].offset, "Q") == 0
        assert len(k.program.slots) == 5 + HIDDEN_POINTERS
        assert k.program.dynamic_smem_B == 16  # type: ignore[attr-defined]
        assert launch.shared_B >= 16 + 1024  # the dynamic part on top of sm_90's reserved 1 KiB
    finally:
        d.close()


@pytest.mark.nvidia
@needs_gpu
def test_triton_kernels_on_the_h200_against_torch() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is the reference on the GPU machine")
    from runtime.hcq import open_device
    d = open_device("nv:0")
    try:
        err = run_suite(d, DATA / "sm90", np.random.default_rng(0))
        assert max(err.values()) < 2e-3, err  # tl.dot on sm_90 rounds through tf32/fp16 paths
        # PyTorch computes the same softmax on the same GPU.
        m = torch.randn(8, 100, device="cuda")
        sm = load_triton(d, DATA / "sm90" / "softmax")
        I = _buf(d, m.cpu().numpy())
        O = d.alloc(m.numel() * 4)
        sm(O, I, 100, 100, 100, grid=(8,), wait=True)
        ref = torch.softmax(m, dim=1).cpu().numpy()
        assert np.abs(_out(d, O, (8, 100), np.float32) - ref).max() < 1e-5
    finally:
        d.close()
