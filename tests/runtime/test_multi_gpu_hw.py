"""Two NVIDIA GPUs of one machine: a kernel on GPU 1 reading GPU 0's VRAM through a peer
mapping, GPU↔GPU copies of 1 B to 1 GiB byte for byte on the peer and the bounce paths, and signal
chains that bounce between the two GPUs' queues. The same logic runs on the mocks in CI
(test_multi_device.py); these tests need the real hardware.

Every test is marked `nvidia` and skips with a reason where fewer than two NVIDIA GPUs are present
(the single-GPU machine included). A faulthandler watchdog bounds each test, as in test_nv_hw.py.
"""
from __future__ import annotations

import faulthandler
import os
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from runtime.hcq import TransferPath, open_devices, transfer, wait_all
from runtime.hcq.seam import RealOS


def _gpu_count() -> int:
    from runtime.drivers.nv.probe import count_gpus
    return count_gpus(RealOS())


GPUS = _gpu_count()
pytestmark = [pytest.mark.nvidia,
              pytest.mark.skipif(GPUS < 2, reason=f"needs two NVIDIA GPUs, this machine has {GPUS}")]
SRC = (Path(__file__).parent / "data" / "nv_kernels.cu").read_text()
WATCHDOG_S = float(os.environ.get("NV_TEST_WATCHDOG_S", "240"))


@pytest.fixture(autouse=True)
def watchdog() -> Iterator[None]:
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Any, Any]]:
    d0, d1 = open_devices("nv:0", "nv:1")
    for d in (d0, d1):
        d.default_timeout_ms = 20_000.0
    yield d0, d1
    d1.close()
    d0.close()


def _bytes(n: int, seed: int) -> np.ndarray:
    return np.frombuffer(np.random.default_rng(seed).bytes(n), np.uint8)


def test_two_gpus_are_peers(pair: tuple[Any, Any]) -> None:
    d0, d1 = pair
    assert d0.uuid != d1.uuid and d0.os.kernel is d1.os.kernel
    reason = d1.peer_access(d0)
    assert reason is None, f"no peer access between nv:0 and nv:1 ({reason}); the bounce tests " \
                           "below still run"


def test_kernel_reads_peer_memory(pair: tuple[Any, Any]) -> None:
    """vadd on GPU 1 with `a` in GPU 0's VRAM (mapped on GPU 1) and `b`, `c` in its own."""
    d0, d1 = pair
    if d1.peer_access(d0) is not None:
        pytest.skip(f"no peer access: {d1.peer_access(d0)}")
    n = 1_000_003
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    A = d0.alloc(a.nbytes)
    d0.copyin(A, a)
    B, C = d1.alloc(b.nbytes), d1.alloc(b.nbytes)
    d1.copyin(B, b)
    d0.synchronize()
    prg = d1.program(d1.compiler.compile(SRC, "nv_kernels.cu"), "vadd")
    prg(d1.map_peer(A), B, C, n, global_size=((n + 255) // 256, 1, 1), local_size=(256, 1, 1),
        wait=True)
    out = np.zeros(n, np.float32)
    d1.copyout(out, C)
    assert np.array_equal(out, a + b)


@pytest.mark.parametrize("size", [1, 5, 4095, 4097, (1 << 20) + 7, 64 << 20, 1 << 30])
@pytest.mark.parametrize("path", [TransferPath.PEER, TransferPath.HOST_BOUNCE])
def test_gpu_to_gpu_copies_byte_for_byte(pair: tuple[Any, Any], size: int,
                                         path: TransferPath) -> None:
    d0, d1 = pair
    if path is TransferPath.PEER and d0.peer_access(d1) is not None:
        pytest.skip(f"no peer access: {d0.peer_access(d1)}")
    x = _bytes(size, size)
    a, b = d0.alloc(size), d1.alloc(size)
    try:
        d0.copyin(a, x)
        assert transfer(b, a, size, path=path).path is path
        out = np.empty(size, np.uint8)
        d1.copyout(out, b)
        assert np.array_equal(out, x)
        back = d0.alloc(size)            # and the other way
        transfer(back, b, size, path=path)
        out[:] = 0
        d0.copyout(out, back)
        assert np.array_equal(out, x)
        d0.free(back)
    finally:
        d0.free(a)
        d1.free(b)


def test_cross_device_signal_chain(pair: tuple[Any, Any]) -> None:
    """1,000 hand-overs: GPU 0 signals 2i-1 after waiting for GPU 1's 2i-2, and back."""
    d0, d1 = pair
    s0, s1 = d0.new_signal(0), d1.new_signal(0)
    s1_on_0, s0_on_1 = d0.map_signal(s1), d1.map_signal(s0)
    for i in range(1, 501):
        d0.copy_queue().wait(s1_on_0, 2 * i - 2).signal(s0, 2 * i - 1).submit()
        d1.copy_queue().wait(s0_on_1, 2 * i - 1).signal(s1, 2 * i).submit()
    wait_all([(s0, 999), (s1, 1000)], timeout_ms=20_000)
    assert (s0.value, s1.value) == (999, 1000)


def test_peer_transfer_ordering_under_load(pair: tuple[Any, Any]) -> None:
    """Write on GPU 0, move to GPU 1, overwrite on GPU 0, repeat: each step sees the last."""
    d0, d1 = pair
    n = 16 << 20
    a, b = d0.alloc(n), d1.alloc(n)
    out = np.empty(n, np.uint8)
    for i in range(8):
        d0.copyin(a, np.full(n, i, np.uint8))
        transfer(b, a, n)
        d0.copyin(a, np.full(n, 0xEE, np.uint8))
        d1.copyout(out, b)
        assert (out == i).all()
    d0.free(a)
    d1.free(b)
