"""Package layout that pyproject.toml cannot express: the bindings folder `generated/` is installed as
the package `hcq_bindings`, a name this project owns (a top-level `generated` collides with other
distributions), and the NVIDIA launch helper is built as an optional C extension. Everything else is
declared in pyproject.toml."""
import hashlib
from pathlib import Path

from setuptools import Extension, find_namespace_packages, find_packages, setup

BINDINGS = "hcq_bindings"
NVLAUNCH_C = "runtime/drivers/nv/_nvlaunch.c"

packages = find_packages(include=["bindgen", "bindgen.*", "bindgen_rt", "runtime", "runtime.*"])
packages += [BINDINGS] + [f"{BINDINGS}.{p}" for p in find_namespace_packages("generated")
                          if "__pycache__" not in p]

# The launch helper, built with the wheel (optional: without a compiler the wheel still builds and
# the runtime falls back to building it on demand, or to its Python path). It records the sha256 of
# its source, so that the runtime can tell it from a stale build (runtime/hcq/native.py).
_sha = hashlib.sha256((Path(__file__).parent / NVLAUNCH_C).read_bytes()).hexdigest()
nvlaunch = Extension("runtime.drivers.nv._nvlaunch", [NVLAUNCH_C], optional=True,
                     define_macros=[("HCQ_SOURCE_SHA256", f'"{_sha}"')],
                     extra_compile_args=["-O2", "-fvisibility=hidden"])

setup(packages=packages, package_dir={BINDINGS: "generated"}, ext_modules=[nvlaunch])
