#!/usr/bin/env bash
# Installs everything the project needs on a fresh Debian 12 machine (run as root). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive
need=()
for pkg in gcc libc6-dev libgcc-12-dev libstdc++-12-dev clang-16 lld-16 llvm-16 pciutils; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
# The NVIDIA launch helper (runtime/hcq/native.py) is compiled against this interpreter's headers;
# Debian's own python3 keeps them in python3-dev (other interpreters ship them).
if ! python3 -c 'import os, sysconfig; p = sysconfig.get_paths()["include"]
raise SystemExit(not os.path.exists(os.path.join(p, "Python.h")))' \
    && [ "$(readlink -f "$(command -v python3)")" = "$(readlink -f /usr/bin/python3)" ]; then
  need+=(python3-dev)
fi
# apt-get download (bindgen's debian sources) needs current package lists either way.
apt-get update -qq
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${need[*]}"
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e '.[test]'
echo "setup: ok ($(python3 -c 'import clang.cindex as c; c.Index.create(); print("libclang loads")'))"
