<%page args="m, info, title, docstring, private"/>\
${title}
# spec: ${info.spec_file}  target: ${m.target}
# fingerprint: ${info.fingerprint}
# inputs: ${info.inputs_hash}  headers: ${info.headers_hash}
# regenerate with: bindgen regen ${m.target}
${docstring.rstrip()}

The definitions are in ${info.defs_module}.py beside this file, readable Python. Each is compiled
from there (with its real file name and line numbers) when first used, so importing this module
costs almost nothing; `__materialize_all__()` makes every one now. Type checkers and IDEs see them
all through the re-export below.
"""

from bindgen_rt.lazy import LazyModule as _LazyModule

_LAZY = _LazyModule(globals(), ${repr(info.defs_module)}, ${repr(info.fingerprint)})
TYPE_CHECKING = False

if not TYPE_CHECKING:  # hidden from type checkers: a misspelt name must stay an error there

    def __getattr__(name: str) -> object:
        return _LAZY.get(name)

    def __dir__() -> list[str]:
        return _LAZY.dir()


def __materialize_all__() -> None:
    _LAZY.materialize_all()


if TYPE_CHECKING:
    from .${info.defs_module} import *  # noqa: F403
% if private:
${private}
% endif
