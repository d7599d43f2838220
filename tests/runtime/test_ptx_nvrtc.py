"""NVRTC kernels of the test suite (tests/runtime/data/nv_kernels.cu) executed end to end: on the
mock NVIDIA GPU through the PTX interpreter (NVDevice compiles to PTX there), and, marked
`nvidia`, on the real GPU from the same source. Every kernel is checked against numpy; integer and
exactly rounded float kernels are compared bit for bit, so where both targets run, the H200 and
the mock give the same bits. Sizes are per target: small enough for the interpreter on the mock,
large enough to fill the H200 on the real GPU (`big`)."""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import NVDevice
from runtime.hcq.device import parse_device_name

SRC = (Path(__file__).parent / "data" / "nv_kernels.cu").read_text()
HAVE_NV = os.path.exists("/dev/nvidiactl") and os.path.exists("/dev/nvidia-uvm")


def _nvrtc_missing() -> str | None:
    try:
        from runtime.drivers.nv.compiler import find_nvrtc
        find_nvrtc()
    except Exception as e:  # noqa: BLE001 - the reason becomes the skip message
        return str(e).splitlines()[0]
    return None


@pytest.fixture(scope="module", params=[
    pytest.param("mock-nv:0", id="mock-nv"),
    pytest.param("nv:0", id="nv", marks=[
        pytest.mark.nvidia,
        pytest.mark.skipif(not HAVE_NV, reason="no NVIDIA GPU here (/dev/nvidiactl or "
                                               "/dev/nvidia-uvm is absent)")]),
])
def dev(request: pytest.FixtureRequest) -> Iterator[NVDevice]:
    why = _nvrtc_missing()
    if why:
        pytest.skip(f"NVRTC is not available: {why}")
    d = NVDevice(request.param)
    d.default_timeout_ms = 20_000.0
    yield d
    d.close()


@pytest.fixture(scope="module")
def big(dev: NVDevice) -> bool:
    """True on a real GPU, where the tests use sizes that fill it."""
    return not parse_device_name(dev.name).mock


@pytest.fixture(scope="module")
def lib(dev: NVDevice) -> bytes:
    return dev.compiler.compile(SRC, "nv_kernels.cu")


def _up(dev: NVDevice, arr: np.ndarray) -> Any:
    buf = dev.alloc(max(arr.nbytes, 1))
    dev.copyin(buf, np.ascontiguousarray(arr).view(np.uint8).reshape(-1))
    return buf


def _down(dev: NVDevice, buf: Any, dtype: Any, count: int) -> np.ndarray:
    out = np.zeros(count, dtype)
    dev.copyout(out.view(np.uint8), buf)
    return out


def _run(dev: NVDevice, lib: bytes, name: str, args: tuple[Any, ...], grid: tuple[int, ...],
         block: tuple[int, ...], dyn: int = 0) -> None:
    prg = dev.program(lib, name, dynamic_smem_B=dyn)
    prg(*args, global_size=grid, local_size=block, wait=True)


def test_vadd(dev: NVDevice, lib: bytes) -> None:
    n = 1000
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    A, B, C = _up(dev, a), _up(dev, b), dev.alloc(4 * n)
    _run(dev, lib, "vadd", (A, B, C, n), ((n + 255) // 256, 1, 1), (256, 1, 1))
    assert np.array_equal(_down(dev, C, np.float32, n), a + b)


def test_inc(dev: NVDevice, lib: bytes) -> None:
    x = np.arange(300, dtype=np.uint32) * 3
    X = _up(dev, x)
    _run(dev, lib, "inc", (X, 299), (2, 1, 1), (256, 1, 1))
    want = x.copy()
    want[:299] += 1
    assert np.array_equal(_down(dev, X, np.uint32, 300), want)


def test_2d_grid_not_a_block_multiple(dev: NVDevice, lib: bytes, big: bool) -> None:
    h, w = (333, 517) if big else (33, 51)
    x = np.random.default_rng(2).random((h, w), dtype=np.float32)
    X, Y = _up(dev, x), dev.alloc(x.nbytes)
    _run(dev, lib, "transpose_scale", (X, Y, w, h, 2.5), ((w + 15) // 16, (h + 15) // 16, 1),
         (16, 16, 1))
    assert np.array_equal(_down(dev, Y, np.float32, h * w).reshape(w, h), x.T * np.float32(2.5))


def test_3d_grid(dev: NVDevice, lib: bytes, big: bool) -> None:
    nx, ny, nz = (37, 21, 13) if big else (17, 11, 5)
    O = dev.alloc(nx * ny * nz * 4)
    _run(dev, lib, "grid3d", (O, nx, ny, nz), ((nx + 7) // 8, (ny + 3) // 4, (nz + 1) // 2),
         (8, 4, 2))
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    want = (x + 1000 * y + 1000000 * z).astype(np.uint32).reshape(-1)
    assert np.array_equal(_down(dev, O, np.uint32, want.size), want)


def test_shared_memory_with_barriers(dev: NVDevice, lib: bytes, big: bool) -> None:
    blocks = 40 if big else 6
    x = np.arange(256 * blocks, dtype=np.int32) * 7 - 5
    X, Y = _up(dev, x), dev.alloc(x.nbytes)
    _run(dev, lib, "block_reverse", (X, Y), (blocks, 1, 1), (256, 1, 1))
    want = x.reshape(blocks, 256)[:, ::-1].reshape(-1)
    assert np.array_equal(_down(dev, Y, np.int32, x.size), want)


def test_dynamic_shared_memory_reduction(dev: NVDevice, lib: bytes, big: bool) -> None:
    n, bs = (100_000 if big else 5000), 512
    x = np.random.default_rng(3).integers(-8, 8, n).astype(np.float32)
    blocks = (n + bs - 1) // bs
    X, O = _up(dev, x), dev.alloc(blocks * 4)
    _run(dev, lib, "block_sum", (X, O, n), (blocks, 1, 1), (bs, 1, 1), dyn=bs * 4)
    want = np.add.reduceat(x, np.arange(0, n, bs))
    assert np.array_equal(_down(dev, O, np.float32, blocks), want)


def test_many_parameters(dev: NVDevice, lib: bytes) -> None:
    O = dev.alloc(16 * 8)
    args = (-3, -300, 70000, -(1 << 40), 1.5, 2.25, 7, -8, 3.125, -0.5, 200, 1 << 50, -12, 99,
            0.75, -1e300)
    _run(dev, lib, "many_params", (O, *args), (1, 1, 1), (32, 1, 1))
    assert _down(dev, O, np.float64, 16).tolist() == [float(a) for a in args]


def test_atomics_under_contention(dev: NVDevice, lib: bytes, big: bool) -> None:
    n = 200_000 if big else 1000
    keys = np.random.default_rng(4).integers(0, 1 << 20, n).astype(np.uint32)
    K = _up(dev, keys)
    H, M, F = _up(dev, np.zeros(64, np.uint32)), _up(dev, np.zeros(1, np.int32)), \
        _up(dev, np.zeros(1, np.float32))
    _run(dev, lib, "atomics", (K, n, H, M, F), ((n + 255) // 256, 1, 1), (256, 1, 1))
    assert np.array_equal(_down(dev, H, np.uint32, 64), np.bincount(keys % 64, minlength=64))
    assert _down(dev, M, np.int32, 1)[0] == keys.max()
    assert _down(dev, F, np.float32, 1)[0] == float(n)


def test_double_precision_fma(dev: NVDevice, lib: bytes, big: bool) -> None:
    n = 12345 if big else 1234
    x, y = np.random.default_rng(5).random(n), np.random.default_rng(6).random(n)
    X, Y = _up(dev, x), _up(dev, y)
    _run(dev, lib, "daxpy", (0.3, X, Y, n), ((n + 127) // 128, 1, 1), (128, 1, 1))
    assert np.allclose(_down(dev, Y, np.float64, n), 0.3 * x + y, rtol=1e-15, atol=0)


def test_device_globals(dev: NVDevice, lib: bytes) -> None:
    n = 1000
    idx = np.random.default_rng(7).integers(0, 1000, n).astype(np.int32)
    I, O = _up(dev, idx), dev.alloc(n * 4)
    _run(dev, lib, "lookup", (I, O, n), ((n + 255) // 256, 1, 1), (256, 1, 1))
    table = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    assert np.array_equal(_down(dev, O, np.int32, n), table[idx & 7] * 10 + np.arange(n))


def test_constant_memory(dev: NVDevice, lib: bytes, big: bool) -> None:
    n = 4096 if big else 1024
    x = np.linspace(-2, 2, n, dtype=np.float32)
    X, Y = _up(dev, x), dev.alloc(n * 4)
    _run(dev, lib, "poly", (X, Y, n), (n // 256, 1, 1), (256, 1, 1))
    want = ((np.float32(0.25) * x + np.float32(2.0)) * x - np.float32(1.0)) * x + np.float32(0.5)
    assert np.allclose(_down(dev, Y, np.float32, n), want, rtol=1e-6, atol=1e-6)


def test_local_memory(dev: NVDevice, lib: bytes, big: bool) -> None:
    n = 10_000 if big else 500
    idx = np.random.default_rng(8).integers(0, 10_000, n).astype(np.int32)
    I, O = _up(dev, idx), dev.alloc(n * 4)
    _run(dev, lib, "local_array", (I, O, n), ((n + 127) // 128, 1, 1), (128, 1, 1))
    i = np.arange(n)
    want = (idx % 96) * (i + 1) + ((idx * 7) % 96) * (i + 1)
    assert np.array_equal(_down(dev, O, np.int32, n), want.astype(np.int32))


def test_warp_shuffle(dev: NVDevice, lib: bytes) -> None:
    x = np.random.default_rng(9).integers(-100, 100, 32 * 64).astype(np.int32)
    X, O = _up(dev, x), dev.alloc(64 * 4)
    _run(dev, lib, "warp_sum", (X, O), (8, 1, 1), (256, 1, 1))
    assert np.array_equal(_down(dev, O, np.int32, 64), x.reshape(64, 32).sum(1))


def test_grid_stride_loop(dev: NVDevice, lib: bytes, big: bool) -> None:
    n, blocks = (3_000_001, 132) if big else (30_001, 13)
    x = np.random.default_rng(10).random(n, dtype=np.float32)
    X = _up(dev, x)
    _run(dev, lib, "scale_stride", (X, n, 3.0), (blocks, 1, 1), (256, 1, 1))
    assert np.array_equal(_down(dev, X, np.float32, n), x * np.float32(3.0))


def test_struct_by_value(dev: NVDevice, lib: bytes) -> None:
    n = 777
    x = np.random.default_rng(11).random(n, dtype=np.float32)
    X, Y = _up(dev, x), dev.alloc(n * 4)
    params = struct.pack("<i4xdf4x", n, 1.5, -2.0)
    _run(dev, lib, "affine", (X, Y, params), ((n + 63) // 64, 1, 1), (64, 1, 1))
    want = (x.astype(np.float64) * 1.5).astype(np.float32) - np.float32(2.0)
    assert np.array_equal(_down(dev, Y, np.float32, n), want)
