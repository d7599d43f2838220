<%page args="m, info, title, docstring, ctypes_import, helpers, libraries, typing_names, ctypes_typing, lazy"/>\
${title}
# spec: ${info.spec_file}  target: ${m.target}
# fingerprint: ${info.fingerprint}
# inputs: ${info.inputs_hash}  headers: ${info.headers_hash}
# regenerate with: bindgen regen ${m.target}
% if lazy:
${docstring[:-3].rstrip()}

Import `${m.target}` (beside this file): it compiles each definition from here on first use. This
module also runs as a whole (what `__materialize_all__` does). The index at the end says where each
statement is.
"""
% else:
${docstring}
% endif

# -- imports
% if ctypes_import:
${ctypes_import}
% endif
import bindgen_rt as _rt
% if helpers:
from bindgen_rt import ${", ".join(helpers)}
% endif
% for line in libraries:
${line}
% endfor
# -- end of imports
% if typing_names or ctypes_typing:

TYPE_CHECKING = False
if TYPE_CHECKING:  # names only annotations use
% if ctypes_typing:
    from ctypes import ${", ".join(ctypes_typing)}
% endif
% if typing_names:
    from typing import ${", ".join(typing_names)}
% endif
% endif
