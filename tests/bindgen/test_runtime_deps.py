"""Programs that use the bindings never load the generator: importing (and fully materialising)
every committed generated module, and importing ``runtime.hcq``, loads neither ``bindgen`` nor its
dependencies (clang, mako, yaml). Checked in a fresh interpreter through ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

from .test_generated import MODULES

FORBIDDEN = ("bindgen", "clang", "mako", "yaml")

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    everything = vars(mod).get("__materialize_all__")
    if everything:
        everything()
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(*modules: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _generator_modules(loaded: list[str]) -> list[str]:
    return [m for m in loaded if m.split(".")[0] in FORBIDDEN]


def test_generated_modules_do_not_load_the_generator():
    assert len(MODULES) >= 10
    loaded = _loaded(*MODULES)
    assert "bindgen_rt" in loaded and "bindgen_rt.records" in loaded  # the probe did use them
    assert _generator_modules(loaded) == []


def test_runtime_hcq_does_not_load_the_generator():
    loaded = _loaded("runtime.hcq", "runtime.drivers.nv.device", "runtime.drivers.amd.device")
    assert _generator_modules(loaded) == []


def test_the_probe_would_see_the_generator():
    """The check can fail: importing the generator's CLI shows up as forbidden modules."""
    assert "bindgen" in [m.split(".")[0] for m in _generator_modules(_loaded("bindgen.cli"))]


def test_cli_without_the_generator_extra_says_what_to_install():
    code = "import sys; sys.modules['yaml'] = None\nfrom bindgen.cli import main\nsys.exit(main(['list']))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "needs pyyaml, which is not installed: pip install 'gpu-hcq-toolkit[bindgen]'" in r.stderr
