#!/usr/bin/env bash
# The README's two commands as a new user meets them, on this machine: a fresh clone of the committed
# tree in a throw-away directory (no ../shared beside it, no cache of ours inside it), run as root, with
# a different `python3` first on PATH (a stub that fails when called), so the set-up must make its
# environment from Debian's /usr/bin/python3 and everything must go through .venv.
#   bash scripts/check_fresh_setup.sh            # both commands
#   bash scripts/check_fresh_setup.sh --main     # only the main job
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
for name in python3 python pip pip3; do
  printf '#!/bin/sh\necho "check_fresh_setup: the %s first on PATH was called: $0 $*" >&2\nexit 97\n' \
    "$name" > "$tmp/bin/$name"
  chmod +x "$tmp/bin/$name"
done
if [ -e "$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" ]; then
  echo "check_fresh_setup: /usr/bin/python3 is externally managed (PEP 668), as on Debian 12"
else
  echo "check_fresh_setup: /usr/bin/python3 is NOT externally managed here; this run does not prove PEP 668 handling"
fi
git clone -q "$repo" "$tmp/clone"
cd "$tmp/clone"
export PATH="$tmp/bin:$PATH"
echo "check_fresh_setup: main job in $tmp/clone"
bash scripts/setup.sh && .venv/bin/bindgen regen all --skip-unavailable && .venv/bin/python -m runtime.hcq.demo
if [ "${1:-}" != --main ]; then
  echo "check_fresh_setup: tests in $tmp/clone"
  bash scripts/setup.sh && .venv/bin/bindgen check --allow-unavailable &&
    .venv/bin/python -m pytest -q -p no:cacheprovider
fi
echo "check_fresh_setup: ok"
