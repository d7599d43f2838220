"""The main job's demo: what it lists, what it runs on each kind of device, and its refusals."""
from __future__ import annotations

import pytest

from runtime.hcq import open_device
from runtime.hcq.demo import main


def test_demo_runs_kernels_on_the_amd_mock(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mock-amd:0", "--n", "1000"]) == 0
    out = capsys.readouterr().out
    assert "mock-amd:0  mock: kernels" in out and "mock-nv:0   mock:" in out
    # on the mock, what the timestamps measure is said: the interpreter, not a GPU
    assert out.count(" ok  interpreter time") == 2 and "demo: passed" in out
    assert "times are the emulator's" in out


def test_demo_runs_kernels_on_the_nv_mock(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("hcq_bindings.cuda.nvrtc")
    from runtime.hcq.errors import ProgramError
    from runtime.drivers.nv.compiler import find_nvrtc
    try:
        find_nvrtc()
    except ProgramError as e:
        pytest.skip(str(e).splitlines()[0])
    assert main(["mock-nv:0", "--n", "1000"]) == 0
    out = capsys.readouterr().out
    assert "mock-nv:0   mock: kernels (PTX interpreter" in out
    assert out.count(" ok  interpreter time") == 2 and "demo: passed" in out
    assert "WRONG" not in out


def test_demo_list_stops_after_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("devices:") and "device: " not in out


@pytest.mark.parametrize("n", ["0", "-5", "many"])
def test_demo_refuses_a_bad_size_with_a_usage_error(n: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["mock-amd:0", "--n", n])
    assert e.value.code == 2 and "--n" in capsys.readouterr().err


def test_devices_say_whether_they_execute_kernels() -> None:
    for name, expected in (("mock-amd:0", True), ("mock-nv:0", True)):
        dev = open_device(name)
        try:
            assert dev.executes_kernels is expected, name
        finally:
            dev.close()
