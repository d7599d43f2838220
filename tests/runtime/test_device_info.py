"""Device.properties, Device.mem_info() and $HCQ_DEVICE on both mock GPUs (the mocks answer the
kernel drivers' own ioctls: KFD's AVAILABLE_MEMORY and topology memory banks, RM's FB and GR
info and name string)."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from runtime.hcq import DeviceNotFound, DeviceProperties, MemInfo, open_device

MOCKS = ["mock-amd:0", "mock-nv:0"]


@pytest.mark.parametrize("name", MOCKS)
def test_properties_describe_the_device_in_one_record(name: str) -> None:
    dev = open_device(name)
    try:
        p = dev.properties
        assert isinstance(p, DeviceProperties) and p is dev.properties  # read once
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.name = "x"  # type: ignore[misc]
        assert p.mock and p.arch == dev.arch and p.timestamp_hz == dev.clock_hz
        assert p.simd_width == 32 and p.max_workgroup_size == 1024
        if name.startswith("mock-amd"):
            assert p.vendor == "AMD" and p.compute_units == 96  # a gfx1100 (7900 XTX)
            assert p.shared_memory_per_workgroup_B == 64 << 10 and p.max_clock_hz == 2482e6
            assert p.memory_B == 24 << 30 and "gfx1100" in p.name
        else:
            assert p.vendor == "NVIDIA" and p.compute_units == 132  # an H100/H200 SXM
            assert p.shared_memory_per_workgroup_B == 227 << 10 and p.max_clock_hz is None
            assert p.memory_B == 80 << 30 and p.name.startswith("Mock NVIDIA")
    finally:
        dev.close()


@pytest.mark.parametrize("name", MOCKS)
def test_mem_info_follows_allocations(name: str) -> None:
    dev = open_device(name)
    try:
        free0, total = dev.mem_info()
        assert isinstance(dev.mem_info(), MemInfo) and total == dev.properties.memory_B
        assert 0 < free0 < total
        buf = dev.alloc(64 << 20)
        assert dev.mem_info().free_B == free0 - (64 << 20)
        dev.free(buf)
        dev.trim_pool()  # the pool holds freed memory until trimmed
        assert dev.mem_info() == (free0, total)
    finally:
        dev.close()
    with pytest.raises(Exception, match="closed"):
        dev.mem_info()


def _open_with_env(value: str) -> subprocess.CompletedProcess[str]:
    code = ("from runtime.hcq import open_device, HCQError\n"
            "try:\n    d = open_device()\nexcept HCQError as e:\n    print('error:', e)\n"
            "else:\n    print(d.name, type(d).__name__); d.close()\n")
    env = dict(os.environ, HCQ_DEVICE=value)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_hcq_device_selects_what_open_device_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HCQ_DEVICE", "mock-nv")
    dev = open_device()
    try:
        assert dev.name == "mock-nv" and type(dev).__name__ == "NVDevice"
    finally:
        dev.close()
    monkeypatch.setenv("HCQ_DEVICE", "mock-amd:1")
    dev = open_device("mock-nv:0")  # an explicit name wins over the variable
    try:
        assert dev.name == "mock-nv:0"
    finally:
        dev.close()


@pytest.mark.parametrize("value", ["tpu:0", "nv:7", "amd:3", "mock-nv:99"])
def test_hcq_device_naming_no_device_lists_what_exists(monkeypatch: pytest.MonkeyPatch,
                                                       value: str) -> None:
    monkeypatch.setenv("HCQ_DEVICE", value)
    with pytest.raises(DeviceNotFound) as e:
        open_device()
    msg = str(e.value)
    assert f"HCQ_DEVICE={value!r}" in msg or "mock machine" in msg
    if "mock machine" not in msg:
        assert "devices here:" in msg and "mock-amd:N" in msg and "mock-nv:N" in msg


def test_hcq_device_in_a_fresh_process() -> None:
    r = _open_with_env("mock-nv:1")
    assert r.stdout.strip() == "mock-nv:1 NVDevice", r.stdout + r.stderr
    r = _open_with_env("cuda:0")
    assert r.stdout.startswith("error: HCQ_DEVICE='cuda:0'") and "Traceback" not in r.stderr


def test_nv_programs_name_parameters_from_the_source_they_were_compiled_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from runtime.drivers.nv import cubin
    from runtime.drivers.nv.cubin import param_names_from_source, remember_param_names
    monkeypatch.setattr(cubin, "_PARAM_NAMES", {})  # this test's compilations only
    data = Path(__file__).parent / "data"
    src = (data / "nv_kernels.cu").read_text()
    names = param_names_from_source(src)
    assert names["vadd"] == ["a", "b", "c", "n"] and names["inc"] == ["x", "n"]
    assert param_names_from_source('extern "C" __global__ void k(void) {}') == {"k": []}
    lib = (data / "nv_kernels_cuda13.cubin").read_bytes()
    dev = open_device("mock-nv:0")
    try:
        assert [s.name for s in dev.program(lib, "vadd").slots][:2] == ["arg0", "arg1"]
        remember_param_names(src, lib)  # what NVRTC compiling `src` (or a cache hit) records
        prg = dev.program(lib, "vadd")
        assert [s.name for s in prg.slots] == ["a", "b", "c", "n"]
        with pytest.raises(Exception, match=r"vadd takes 4 arguments \(a, b, c, n\)"):
            prg(dev.alloc(64), 3)
        with pytest.raises(Exception, match="argument 'c' is 8 B, got 3 bytes"):
            prg(dev.alloc(64), dev.alloc(64), b"abc", 1)
    finally:
        dev.close()
