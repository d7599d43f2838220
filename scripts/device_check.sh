#!/usr/bin/env bash
# Everything the NVIDIA driver needs checked on a real GPU, in one command (one device lease call):
#   1. probe: nvidia-smi, device nodes, kernel, Python and the packages the checks use;
#   2. smoke: bring-up, one NVRTC vector add, teardown (with a watchdog; retried with tinygrad's
#      PCAS action 9 if the default launch action fails, and then used for the rest);
#   3. every `nvidia`-marked test (test_nv_hw.py, the device contract in test_device_contract.py,
#      threads and Ctrl-C in test_real_conditions.py, the NVRTC and PTX kernels that the mock also
#      runs, the Triton loader) except the fault tests (pytest -m nvidia -x, per-test timeout);
#   4. the benchmark's NVIDIA section beside CUDA through CuPy and PyTorch (JSON in $OUT);
#   4b. launches and graphs beside a CUDA C++ program built with nvcc and PyTorch's CUDA graphs
#       (scripts/bench_graphs.py, scripts/cuda_graph_bench.cu), and the dependent-launch probe
#       (scripts/probe_nv_deps.py), JSON in $OUT;
#   5. GPU-to-GPU copies beside PyTorch and CuPy (scripts/bench_multi_gpu.py; two GPUs, JSON in $OUT);
#   5b. where a launch's time goes (scripts/nv_latency_probe.py, JSON in $OUT);
#   5c. device properties, mem_info, copy-engine fills and the profiler (test_engine_hw.py), fill
#       bandwidth beside cudaMemset (scripts/bench_fill.py) and the profiler's cost per launch
#       (scripts/bench_profile_cost.py), JSON in $OUT;
#   6. the fault tests, last, each in a process of its own;
#   7. the kernel log's NVRM lines.
# Each step has its own time limit, so a hang costs at most that step. Logs go to $OUT.
# DEPS_PROBE=0 skips the dependent-launch probe (its longest step, about four minutes).
#   OUT=/tmp/out scripts/device_check.sh
set -u
OUT=${OUT:-/tmp/nv_device_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
# Uninstalled: the bindings folder generated/ is imported as `hcq_bindings` (setup.py maps it when
# installed), so a link under that name goes on the path beside the checkout.
mkdir -p /tmp/hcq_path && ln -sfn "$PWD/generated" /tmp/hcq_path/hcq_bindings
export PYTHONPATH="$PWD:/tmp/hcq_path${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}

step() { echo; echo "===== $* ($(date +%T))"; }

{
step "probe"
nvidia-smi --format=csv \
  --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
  2>&1 | head -5
ls -l /dev/nvidia* 2>&1 | head -20
uname -r
$PY --version
$PY - <<'EOF' 2>&1
import importlib, sys
print(sys.executable)
for m in ("numpy", "pytest", "pytest_timeout", "torch", "triton", "cupy"):
    try:
        mod = importlib.import_module(m)
        print(f"{m} {getattr(mod, '__version__', '?')}")
    except Exception as e:  # noqa: BLE001
        print(f"{m} missing: {e!r}")
from runtime.drivers.nv.compiler import find_nvrtc
print("nvrtc:", find_nvrtc())
EOF

TIMEOUT_FLAG=""
$PY -c "import pytest_timeout" 2>/dev/null && TIMEOUT_FLAG="--timeout=150"

step "smoke"
cat > "$OUT/smoke.py" <<'EOF'
import faulthandler, sys, time
faulthandler.dump_traceback_later(60, exit=True)
import numpy as np
from runtime.drivers.nv.device import NVDevice
kw = {"pcas_action": int(sys.argv[1], 0)} if len(sys.argv) > 1 else {}
t = time.perf_counter()
d = NVDevice("nv:0", **kw)
d.default_timeout_ms = 10_000
print(d, d.gpu, f"open {time.perf_counter() - t:.2f} s")
lib = d.compiler.compile(open("tests/runtime/data/nv_kernels.cu").read())
prg = d.program(lib, "vadd")
n = 10_000
a = np.arange(n, dtype=np.float32)
A, B, C = (d.alloc(n * 4) for _ in range(3))
d.copyin(A, a); d.copyin(B, a * 2)
t = prg(A, B, C, n, global_size=((n + 255) // 256, 1, 1), local_size=(256, 1, 1), wait=True)
out = np.zeros(n, np.float32); d.copyout(out, C)
assert np.array_equal(out, a * 3), out[:8]
print(f"SMOKE OK (kernel {t * 1e6:.1f} us)")
d.close()
EOF
timeout 90 $PY "$OUT/smoke.py"
rc=$?
if [ $rc -ne 0 ]; then
  echo "smoke failed (rc $rc); retrying with PCAS action 9 (PREFETCH_SCHEDULE)"
  if timeout 90 $PY "$OUT/smoke.py" 9; then export NV_PCAS_ACTION=9; fi
fi

step "nvidia tests"
timeout 480 $PY -m pytest tests/runtime/test_nv_hw.py tests/runtime/test_device_contract.py \
  tests/runtime/test_real_conditions.py tests/runtime/test_ptx_nvrtc.py tests/runtime/test_ptx_interp.py \
  tests/runtime/test_triton_loader.py tests/runtime/test_graph_dag.py -m nvidia -x -v -rs -s $TIMEOUT_FLAG -p no:cacheprovider -k "not zz_fault" 2>&1 \
  | tee "$OUT/tests.log" | grep -v "^$"
echo "tests rc ${PIPESTATUS[0]}"

step "benchmark (nvidia section)"
timeout 240 $PY scripts/bench_hcq.py --nv --json "$OUT/bench_nv.json"
echo "bench rc $?"

step "launches and graphs beside CUDA C++ (nvcc) and PyTorch's CUDA graphs"
timeout 150 $PY scripts/bench_graphs.py --json "$OUT/bench_graphs.json"
echo "graphs bench rc $?"

step "dependent-launch mechanisms (probe: time and correctness of each)"
if [ "${DEPS_PROBE:-1}" = 0 ]; then
  echo "skipped (DEPS_PROBE=0)"
else
  timeout 300 $PY scripts/probe_nv_deps.py --child-timeout 25 --json "$OUT/probe_deps.json"
  echo "deps probe rc $?"
fi

step "GPU-to-GPU copies beside torch and CuPy (two GPUs; exit 3 where fewer)"
timeout 300 $PY scripts/bench_multi_gpu.py --json "$OUT/bench_multi_gpu.json"
echo "multi-GPU bench rc $?"

step "launch latency probe"
timeout 120 $PY scripts/nv_latency_probe.py --json "$OUT/probe.json"
echo "probe rc $?"

step "engine essentials: properties, mem_info, fills, profiler"
timeout 200 $PY -m pytest tests/runtime/test_engine_hw.py -m nvidia -v -rs -s $TIMEOUT_FLAG \
  -p no:cacheprovider 2>&1 | tee "$OUT/engine_tests.log" | grep -v "^$"
echo "engine tests rc ${PIPESTATUS[0]}"
timeout 200 $PY scripts/bench_fill.py --json "$OUT/bench_fill.json"
echo "fill bench rc $?"
timeout 200 $PY scripts/bench_profile_cost.py --rounds 2 --json "$OUT/bench_profile_cost.json"
echo "profile cost rc $?"

step "fault test (last, own process)"
for f in tests/runtime/test_nv_hw.py tests/runtime/test_device_contract.py; do
  timeout 100 $PY -m pytest "$f" -m nvidia -v -rs -s $TIMEOUT_FLAG -p no:cacheprovider \
    -k zz_fault 2>&1 | tail -40
  echo "fault rc ${PIPESTATUS[0]} ($f)"
done

step "kernel log"
(dmesg 2>/dev/null || journalctl -k 2>/dev/null) | grep -i -E "nvrm|xid|nvidia-uvm" | tail -30
step "done"
} 2>&1 | tee "$OUT/device_check.log"
