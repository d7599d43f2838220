"""Package layout that pyproject.toml cannot express: the bindings folder `generated/` is installed as
the package `hcq_bindings`, a name this project owns (a top-level `generated` collides with other
distributions). Everything else is declared in pyproject.toml."""
from setuptools import find_namespace_packages, find_packages, setup

BINDINGS = "hcq_bindings"

packages = find_packages(include=["bindgen", "bindgen.*", "bindgen_rt", "runtime", "runtime.*"])
packages += [BINDINGS] + [f"{BINDINGS}.{p}" for p in find_namespace_packages("generated")
                          if "__pycache__" not in p]

setup(packages=packages, package_dir={BINDINGS: "generated"})
