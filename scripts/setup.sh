#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian 12 machine (run as root). Idempotent.
#
# Debian's python3 is externally managed (PEP 668: `pip install` outside a virtual environment is
# refused), so the project lives in a virtual environment in the checkout, .venv, made from Debian's own
# interpreter whatever `python3` comes first on PATH. Everything then runs through it:
#   .venv/bin/bindgen ...   .venv/bin/python -m pytest   .venv/bin/python -m runtime.hcq.demo
# PYTHON=/path/to/python3 picks another interpreter (>= 3.11) for the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
PY=${PYTHON:-/usr/bin/python3}
VENV=.venv

need=()
# ca-certificates: bindgen fetches wheels over HTTPS; git: its git sources (and their tests); g++:
# the C++ header facts tests (nvrtc); xz-utils: the tests build multi-block xz archives.
# libdrm2, libvulkan1, ocl-icd-libopencl1, zlib1g, liburing2: the real C libraries the bindgen
# tests bind and call (tests/bindgen/test_real_libraries.py).
for pkg in gcc libc6-dev libgcc-12-dev libstdc++-12-dev clang-16 lld-16 llvm-16 pciutils \
           ca-certificates git g++ xz-utils libdrm2 libvulkan1 ocl-icd-libopencl1 zlib1g liburing2; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ "$PY" = /usr/bin/python3 ]; then
  # The interpreter itself, venv + ensurepip, and the headers the NVIDIA launch helper compiles against.
  for pkg in python3 python3-venv python3-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
  done
fi
# apt-get download (bindgen's debian sources) needs current package lists either way.
echo "setup: updating Debian package lists"
apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need[*]}"
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

"$PY" - <<'EOF'
import sys, sysconfig, os
if sys.version_info < (3, 11):
    raise SystemExit(f"setup: {sys.executable} is Python {sys.version.split()[0]}; 3.11 or newer is needed")
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
print(f"setup: {sys.executable} (Python {sys.version.split()[0]}) is "
      + ("externally managed (PEP 668): installing into .venv" if managed
         else "not externally managed; installing into .venv all the same"))
EOF

# Reuse an environment made from the same interpreter; remake one that is broken or from another.
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import sys' 2>/dev/null \
    && [ "$("$VENV/bin/python" -c 'import os, sys; print(os.path.realpath(sys._base_executable))')" \
         = "$("$PY" -c 'import os, sys; print(os.path.realpath(sys.executable))')" ]; then
  :
else
  rm -rf "$VENV"
  echo "setup: creating $VENV from $PY"
  "$PY" -m venv "$VENV"
fi
echo "setup: installing the project, the generator's and the tests' dependencies and NVRTC into $VENV (pip install -e .[bindgen,test,nvrtc])"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[bindgen,test,nvrtc]'
echo "setup: ok ($("$VENV/bin/python" -c 'import clang.cindex as c; c.Index.create(); print("libclang loads")'));" \
     "run everything through $VENV/bin (bindgen, python)"
