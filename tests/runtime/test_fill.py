"""Device.fill on the copy engines of both mock GPUs: SDMA CONSTANT_FILL (dword and byte fills)
and the NVIDIA copy engine's remap of a constant, checked against numpy for any offset, size and
value; ordered with copies; refused arguments leave the device usable."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.hcq import Device, HCQMemoryError, open_device

SIZE = 4096


@pytest.fixture(scope="module", params=["mock-amd:0", "mock-amd-gfx942", "mock-nv:0"])
def dev(request: pytest.FixtureRequest) -> Iterator[Device]:
    if request.param == "mock-amd-gfx942":  # SDMA 4.4's CONSTANT_FILL (22-bit COUNT)
        from runtime.drivers.amd.device import AMDDevice
        from runtime.drivers.mock.os import MockOS
        d: Device = AMDDevice("amd:0", os=MockOS.with_amd_gpus(1, archs="gfx942"))
    else:
        d = open_device(request.param)
    yield d
    d.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(0, SIZE), size=st.integers(0, SIZE), byte=st.integers(0, 255),
       word=st.integers(0, 0xFFFFFFFF), wide=st.booleans())
def test_fill_matches_numpy(dev: Device, offset: int, size: int, byte: int, word: int,
                            wide: bool) -> None:
    size = min(size, SIZE - offset)
    buf = dev.alloc(SIZE)
    try:
        init = np.arange(SIZE, dtype=np.uint32).view(np.uint8)[:SIZE].copy()
        dev.copyin(buf, init)
        want = init.copy()
        if wide:
            offset, size = offset & ~3, size & ~3
            dev.fill(buf, word, size, offset, width=4)
            want[offset:offset + size] = np.tile(np.frombuffer(word.to_bytes(4, "little"),
                                                               np.uint8), size // 4)
        else:
            dev.fill(buf, byte, size, offset)
            want[offset:offset + size] = byte
        out = np.empty(SIZE, np.uint8)
        dev.copyout(out, buf)  # ordered after the fill, like any later submission
        assert np.array_equal(out, want)
    finally:
        dev.free(buf)


def test_fill_is_ordered_between_copies_and_defaults_to_the_whole_buffer(dev: Device) -> None:
    a, b = dev.alloc(1 << 20), dev.alloc(1 << 20)
    try:
        dev.copyin(a, np.full(1 << 20, 7, np.uint8))
        dev.fill(b, 0)
        dev.transfer(b, a, 1 << 19)      # after the fill: its first half becomes 7s
        dev.fill(a, 0x11223344, 8, 16, width=4)
        out = np.empty(1 << 20, np.uint8)
        dev.copyout(out, b)
        assert (out[:1 << 19] == 7).all() and (out[1 << 19:] == 0).all()
        head = np.empty(32, np.uint8)
        dev.copyout(head, a)
        assert head[16:24].tobytes() == bytes.fromhex("4433221144332211") and head[0] == 7
    finally:
        dev.free(a)
        dev.free(b)


@pytest.mark.parametrize("call, match", [
    (lambda d, b: d.fill(b, 256), "does not fit 1 byte"),
    (lambda d, b: d.fill(b, -1), "does not fit"),
    (lambda d, b: d.fill(b, 1.5), "must be an integer"),
    (lambda d, b: d.fill(b, 0, 4, 2, width=4), "multiples of 4"),
    (lambda d, b: d.fill(b, 0, 4, 0, width=2), "width must be 1"),
    (lambda d, b: d.fill(b, 0, 8192), "outside"),
    (lambda d, b: d.fill(b"x", 0), "must be a Buffer"),
])
def test_bad_fills_are_refused_and_the_device_stays_usable(dev: Device, call: object,
                                                           match: str) -> None:
    buf = dev.alloc(SIZE)
    try:
        v = dev.timeline_value
        with pytest.raises(HCQMemoryError, match=match):
            call(dev, buf)  # type: ignore[operator]
        assert dev.timeline_value == v
        dev.fill(buf, 3, 16)
        out = np.empty(16, np.uint8)
        dev.copyout(out, buf)
        assert (out == 3).all()
    finally:
        dev.free(buf)


def test_the_packets_decode_by_name() -> None:
    """The SDMA stream names CONSTANT_FILL and its fields (decoded with the generated packet
    descriptions), a dword fill for the aligned middle and byte fills at the ends."""
    from runtime.drivers.amd.decode import describe_sdma
    d = open_device("mock-amd:0")
    try:
        q = d.copy_queue().fill(0x10002, 0x5A5A5A5A, 11)
        words = list(q._d)
        texts = []
        while words:
            texts.append(describe_sdma(words, arch=d.gfx))  # type: ignore[attr-defined]
            words = words[5:]
        assert len(texts) == 3 and all("CONSTANT_FILL" in t for t in texts), texts
        assert "fillsize=0x0 " in texts[0] and "fillsize=0x2 " in texts[1] and "count=0x7" in texts[1]
        assert "fillsize=0x0 " in texts[2] and "dst_addr=0x1000c" in texts[2]
    finally:
        d.close()
