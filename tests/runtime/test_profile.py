"""The profiler and the debug log on both mock GPUs: a trace of a known workload holds the
expected events in the expected order, on the expected tracks, and is valid Chrome trace JSON;
nothing is traced or printed when neither is on."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

import runtime.hcq
from runtime.hcq import Device, Launch, Program, open_device

DATA = Path(__file__).parent / "data"
AMD_SRC = """__kernel void add(__global const float *a, __global const float *b,
                               __global float *c, int n) {
    int i = get_global_id(0); if (i < n) c[i] = a[i] + b[i]; }"""
N = 1024


def _vadd(dev: Device) -> Program:
    if dev.name.startswith("mock-amd"):
        from runtime.drivers.amd.compiler import AMDCompiler
        if AMDCompiler().available():
            pytest.skip(AMDCompiler().available() or "")
        return dev.program(dev.compile(AMD_SRC), "add")
    from runtime.drivers.mock.nv_gpu import Launch as MockLaunch
    prg = dev.program((DATA / "nv_kernels_cuda13.cubin").read_bytes(), "vadd")

    def model(launch: MockLaunch) -> None:
        a, b, c = (launch.param(o, "Q") for o in (0, 8, 16))
        n = launch.param(24, "i")
        launch.array(c, np.float32, n)[:] = launch.array(a, np.float32, n) + \
            launch.array(b, np.float32, n)
    dev.os.nv.gpus[0].register_kernel(prg.prog_va, model)  # type: ignore[attr-defined]
    return prg


@pytest.fixture(params=["mock-amd:0", "mock-nv:0"])
def dev(request: pytest.FixtureRequest) -> Iterator[Device]:
    d = open_device(request.param)
    yield d
    d.close()


def _workload(dev: Device, prg: Program) -> np.ndarray:
    a, b, c = (dev.alloc(4 * N) for _ in range(3))
    dev.copyin(a, np.arange(N, dtype=np.float32))
    dev.fill(b, 0)
    prg(a, b, c, N, global_size=(N // 256, 1, 1), local_size=(256, 1, 1))
    g = dev.graph([Launch(prg, (c, a, b, N), (N // 256, 1, 1), (256, 1, 1))])
    g.replay()
    out = np.empty(N, np.float32)
    dev.copyout(out, b)
    return out


def test_trace_of_a_known_workload(dev: Device, tmp_path: Path) -> None:
    prg = _vadd(dev)
    assert dev.tracer is None  # nothing traced outside a profile
    with runtime.hcq.profile() as p:
        out = _workload(dev, prg)
    assert dev.tracer is None
    if dev.executes_kernels or dev.name.startswith("mock-nv"):
        assert np.array_equal(out, 2 * np.arange(N, dtype=np.float32))
    gpu = [e for e in p.events if e.device == dev.name]
    kinds = [(e.kind, e.queue) for e in gpu]
    assert kinds == [("copy", "copy"), ("fill", "copy"), ("launch", "compute"),
                     ("graph", "compute"), ("copy", "copy")], kinds
    for prev, nxt in zip(gpu, gpu[1:]):  # the timeline runs them in submission order
        assert prev.end_s <= nxt.start_s + 1e-6, (prev, nxt)
    launch = gpu[2]
    assert launch.name == prg.name and launch.args["grid"] == [N // 256, 1, 1]
    assert launch.args["block"] == [256, 1, 1] and launch.end_s >= launch.start_s
    assert gpu[0].args["bytes"] == 4 * N and gpu[0].args["GB/s"] > 0
    assert gpu[1].args["pattern"] == "0x00000000"
    # every GPU span follows the host span that submitted it
    submits = [e for e in p.events if e.kind == "submit"]
    assert len(submits) >= 5
    for ev in gpu:
        assert any(s.start_s <= ev.start_s + 1e-6 for s in submits)
    # the trace file: valid JSON, one track per device queue, the kernel with its sizes
    path = tmp_path / "trace.json"
    p.save(path)
    doc = json.loads(path.read_text())
    evs = doc["traceEvents"]
    names = {(e["pid"], e["args"]["name"]) for e in evs if e["name"] == "process_name"}
    pid = next(pid for pid, name in names if name == dev.name)
    threads = {e["args"]["name"] for e in evs if e["name"] == "thread_name" and e["pid"] == pid}
    assert threads == {"compute", "copy"}
    spans = [e for e in evs if e["ph"] == "X"]
    assert all(isinstance(e["ts"], float | int) and e["dur"] >= 0 for e in spans)
    k = next(e for e in spans if e["cat"] == "launch")
    assert k["name"] == prg.name and k["args"]["grid"] == [N // 256, 1, 1]
    assert p.kernels()[0].count == 1 and p.kernels()[0].name in (prg.name, "graph (1 nodes)")
    text = p.summary()
    assert prg.name in text and "copy: 2 x" in text and "fill: 1 x" in text
    assert "mock GPU" in text  # a mock's times are the emulator's


def test_amd_traces_name_the_kernels_own_parameters() -> None:
    dev = open_device("mock-amd:0")
    try:
        prg = _vadd(dev)
        assert [s.name for s in prg.slots] == ["a", "b", "c", "n"]
        buf = dev.alloc(64)
        with pytest.raises(runtime.hcq.ProgramError, match="argument 'n'"):
            prg(buf, buf, buf, 1.5)
        with runtime.hcq.profile() as p:
            prg(buf, buf, buf, 16, global_size=(1, 1, 1), local_size=(16, 1, 1))
        (ev,) = [e for e in p.events if e.kind == "launch"]
        assert ev.args["n"] == 16 and ev.args["a"].startswith("buffer 0x")
    finally:
        dev.close()


def test_streams_and_devices_opened_inside_a_profile_are_traced() -> None:
    with runtime.hcq.profile() as p:
        dev = open_device("mock-amd:0")
        try:
            prg = _vadd(dev)
            buf = dev.alloc(4 * N)
            s = dev.stream()
            s.launch(prg, buf, buf, buf, N, global_size=(4, 1, 1), local_size=(256, 1, 1))
            s.copy(buf, buf, 64, 64, 0)
            s.synchronize()
        finally:
            dev.close()  # what the device recorded is read before it goes
    (ev,) = [e for e in p.events if e.kind == "launch"]
    assert ev.queue == "stream 1" and ev.device == "mock-amd:0"
    (cp,) = [e for e in p.events if e.kind == "copy" and e.queue.startswith("stream")]
    assert cp.queue == "stream 1 copy" and cp.args["bytes"] == 64 and cp.start_s >= ev.end_s - 1e-6


def test_a_wait_that_blocks_is_a_host_span() -> None:
    dev = open_device("mock-nv:0")
    try:
        sig = dev.new_signal(0)
        with runtime.hcq.profile() as p:
            dev.compute_queue().wait(sig, 1).signal(dev.timeline_signal, 0).submit()
            import threading
            threading.Timer(0.02, lambda: setattr(sig, "value", 1)).start()
            sig.wait(1, timeout_ms=5000)
        waits = [e for e in p.events if e.kind == "wait"]
        assert len(waits) == 1 and waits[0].duration_s >= 0.01 and waits[0].device == "host"
    finally:
        dev.close()


def test_profile_env_var_writes_a_trace_of_the_whole_run(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    code = ("import numpy as np\nfrom runtime.hcq import open_device\n"
            "d = open_device('mock-nv:0'); b = d.alloc(4096)\n"
            "d.copyin(b, np.zeros(1024, np.float32)); d.fill(b, 7); d.close()\n")
    env = dict(os.environ, HCQ_PROFILE=str(path))
    env.pop("HCQ_DEBUG", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    doc = json.loads(path.read_text())
    # (host waits that blocked are recorded too: how many depends on the asynchronous mock GPU)
    cats = [e["cat"] for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] not in
            ("submit", "wait")]
    assert cats == ["copy", "fill"], cats


def _run_debug(level: str | None) -> subprocess.CompletedProcess[str]:
    code = ("from runtime.hcq import open_device\n"
            "d = open_device('mock-amd:0'); b = d.alloc(4096); d.fill(b, 7)\n"
            "q = d.copy_queue().signal(d.new_signal(), 1).submit(); d.close()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HCQ_DEBUG", "HCQ_PROFILE")}
    if level is not None:
        env["HCQ_DEBUG"] = level
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)


def test_hcq_debug_prints_submissions_and_nothing_by_default() -> None:
    quiet = _run_debug(None)
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == ""
    one = _run_debug("1")
    assert "hcq: mock-amd:0 copy: fill 4096 B 0x07070707" in one.stderr, one.stderr
    assert "hcq: mock-amd:0 copy: submit of a" in one.stderr and "CONSTANT_FILL" not in one.stderr
    two = _run_debug("2")
    assert "CONSTANT_FILL" in two.stderr and "FENCE" in two.stderr, two.stderr


def test_the_runtime_logger_at_debug_traces_devices_opened_then(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="runtime.hcq"):
        dev = open_device("mock-nv:0")
        try:
            dev.fill(dev.alloc(256), 1)
        finally:
            dev.close()
    assert any("fill 256 B" in r.getMessage() for r in caplog.records)
    dev = open_device("mock-nv:0")
    try:
        assert dev.tracer is None
    finally:
        dev.close()


def test_launches_take_the_untraced_path_when_no_profile_is_open(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With no profile open (and no debug log) a device carries no tracer: launches and copies
    test one attribute and take their usual paths (the NVIDIA launch slots); with a profile open
    they go through the tracer. (What that attribute test costs on the H200 is in
    docs/benchmarks.md: nothing measurable.)"""
    from runtime.hcq.profiler import Tracer
    calls: list[str] = []
    real_launch, real_copy = Tracer.launch, Tracer.copy

    def launch(self: Tracer, *a: Any, **k: Any) -> Any:
        calls.append("launch")
        return real_launch(self, *a, **k)

    def copy(self: Tracer, *a: Any, **k: Any) -> Any:
        calls.append("copy")
        return real_copy(self, *a, **k)
    monkeypatch.setattr(Tracer, "launch", launch)
    monkeypatch.setattr(Tracer, "copy", copy)
    dev = open_device("mock-nv:0")
    try:
        prg = _vadd(dev)
        buf = dev.alloc(4 * N)
        g, l = (4, 1, 1), (256, 1, 1)
        for _ in range(3):
            prg(buf, buf, buf, N, global_size=g, local_size=l)
            dev.fill(buf, 0)
        dev.synchronize()
        assert dev.tracer is None and calls == [] and prg._hot  # the slot launcher was used
        with runtime.hcq.profile():
            prg(buf, buf, buf, N, global_size=g, local_size=l)
            dev.fill(buf, 0)
        assert calls == ["launch", "copy"] and dev.tracer is None
    finally:
        dev.close()
