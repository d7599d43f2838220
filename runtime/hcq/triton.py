"""Triton kernels as programs: a compiled Triton kernel (or its binary plus metadata JSON) loaded on
a device and called with the Triton kernel's own arguments.

What Triton's launcher does and a plain `Program` does not:
- constexpr parameters, and integers Triton specialised into constants (value 1, in the compiled
  kernel's `constants`), are not kernel parameters: they are dropped from the call (checked to be
  what the kernel was compiled with);
- two hidden pointer parameters trail the kernel's own (Triton 3.x): global scratch, allocated per
  launch when the kernel needs it (`global_scratch_size` per program), and profile scratch (null);
- the dynamic shared memory (NVIDIA) or dynamic LDS (AMD) in `metadata.shared` is applied to
  every launch;
- `num_warps` becomes the block size (num_warps x warp_size threads, in x).

```python
from runtime.hcq.triton import load_triton
add = load_triton(dev, "tests/runtime/data/triton/gfx1100/vector_add")   # .hsaco/.cubin(.ptx) + .json
add(x, y, out, n, grid=(triton.cdiv(n, 256),))
```
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Sequence, overload

from runtime.hcq.errors import ProgramError
from runtime.hcq.program import ArgSlot, Program

if TYPE_CHECKING:
    from runtime.hcq.device import Device
    from runtime.hcq.graph import Launch
    from runtime.hcq.memory import Buffer

#: suffix of the binary for a backend
BINARY_SUFFIX = {"cuda": ".cubin", "hip": ".hsaco"}
HIDDEN_POINTERS = 2   # global scratch, profile scratch (Triton 3.x)
# Triton scalar types -> ArgSlot.scalar
_SCALAR = {"i1": "u", "i8": "i", "i16": "i", "i32": "i", "i64": "i", "u1": "u", "u8": "u",
           "u16": "u", "u32": "u", "u64": "u", "fp16": "f", "bf16": "", "fp32": "f", "fp64": "f"}


@dataclass(frozen=True)
class TritonSpec:
    """What a launch needs to know of a compiled Triton kernel (JSON-serialisable).

    `signature` lists every parameter of the Triton function in order as (name, type), types as
    Triton writes them ("*fp32", "i32", "fp32", "constexpr"); `constants` maps the names of
    constexpr and specialised parameters to their compiled values."""

    name: str
    backend: str                 # "cuda" or "hip"
    arch: str                    # "90", "gfx1100"
    signature: tuple[tuple[str, str], ...]
    constants: dict[str, Any] = field(default_factory=dict)
    shared: int = 0
    num_warps: int = 4
    warp_size: int = 32
    global_scratch_size: int = 0
    global_scratch_align: int = 1
    triton_version: str = ""

    def runtime_args(self) -> list[tuple[str, str]]:
        """The parameters the compiled kernel takes before the hidden pointers."""
        return [(n, t) for n, t in self.signature if t != "constexpr" and n not in self.constants]

    def to_json(self) -> str:
        d = dict(self.__dict__, signature=[list(p) for p in self.signature])
        return json.dumps(d, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "TritonSpec":
        d = json.loads(text)
        d["signature"] = tuple((str(n), str(t)) for n, t in d["signature"])
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ProgramError(f"Triton metadata: unknown keys {sorted(unknown)}")
        return cls(**d)


def spec_from_compiled(kernel: Any) -> tuple[bytes, TritonSpec]:
    """(binary, spec) of a `triton.compile(...)` result (a CompiledKernel), for either backend."""
    md = kernel.metadata
    backend = md.target.backend
    binary = kernel.asm["cubin" if backend == "cuda" else "hsaco"]
    sig = list(kernel.src.signature.items())
    constants: dict[str, Any] = {}
    for key, value in kernel.src.constants.items():
        index = key[0] if isinstance(key, tuple) else key
        name = sig[index][0] if isinstance(index, int) else str(index)
        constants[name] = value
    return bytes(binary), TritonSpec(
        name=md.name, backend=backend, arch=str(md.target.arch),
        signature=tuple((str(n), str(t)) for n, t in sig), constants=constants,
        shared=int(md.shared), num_warps=int(md.num_warps),
        warp_size=int(getattr(md, "warp_size", 32)),
        global_scratch_size=int(getattr(md, "global_scratch_size", 0) or 0),
        global_scratch_align=int(getattr(md, "global_scratch_align", 1) or 1),
        triton_version=str(getattr(md, "triton_version", "")))


def save(path: Path | str, binary: bytes, spec: TritonSpec, ptx: str | None = None) -> None:
    """Writes `path`.cubin/.hsaco and `path`.json, and for a CUDA kernel its PTX as `path`.ptx
    (what a GPU that executes PTX, the mock NVIDIA GPU, loads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(BINARY_SUFFIX[spec.backend]).write_bytes(binary)
    path.with_suffix(".json").write_text(spec.to_json())
    if ptx is not None:
        path.with_suffix(".ptx").write_text(ptx)


def load(path: Path | str, code_format: str = "") -> tuple[bytes, TritonSpec]:
    """Reads what `save` wrote (`path` without suffix): the binary, or with `code_format`
    "ptx" the PTX beside it."""
    path = Path(path)
    spec = TritonSpec.from_json(path.with_suffix(".json").read_text())
    if code_format == "ptx":
        ptx = path.with_suffix(".ptx")
        if not ptx.exists():
            raise ProgramError(f"{spec.name}: the device runs PTX and there is no {ptx.name} "
                               f"beside {path.name}{BINARY_SUFFIX[spec.backend]} (rebuild with "
                               "scripts/build_triton_kernels.py, which saves it)")
        return ptx.read_bytes(), spec
    return path.with_suffix(BINARY_SUFFIX[spec.backend]).read_bytes(), spec


class TritonProgram:
    """A Triton kernel on a device, called as `prg(*args, grid=(gx, gy, gz), **constexprs)` with
    the Triton kernel's arguments in its order (see the module docstring for what is done to
    them). `wait=True` blocks and returns the GPU time in seconds, as `Program.__call__`."""

    def __init__(self, device: "Device", binary: bytes, spec: TritonSpec) -> None:
        vendor = "nv" if spec.backend == "cuda" else "amd"
        if not device.name.split(":")[0].endswith(vendor):
            raise ProgramError(f"{spec.name}: a {spec.backend} Triton kernel cannot run on "
                               f"{device.name}")
        self.device, self.spec = device, spec
        self.block = (spec.num_warps * spec.warp_size, 1, 1)
        prog: Any = device.program  # each driver names its dynamic shared memory its own way
        if vendor == "nv":
            self.program: Program = prog(binary, spec.name, dynamic_smem_B=spec.shared)
        else:
            self.program = prog(binary, spec.name, dynamic_lds_B=spec.shared)
        params = spec.runtime_args()
        slots = self.program.slots
        if len(slots) != len(params) + HIDDEN_POINTERS:
            raise ProgramError(f"{spec.name}: the binary takes {len(slots)} parameters, the "
                               f"metadata names {len(params)} and {HIDDEN_POINTERS} hidden "
                               "pointers (was it compiled by another Triton version?)")
        # Name and type the kernel's slots after the Triton signature (errors then say "n").
        typed = [ArgSlot(name, s.offset, s.size, "buffer" if t.startswith("*") else "value",
                         "" if t.startswith("*") else _SCALAR.get(t, ""))
                 for (name, t), s in zip(params, slots)]
        hidden = [ArgSlot(n, s.offset, s.size, "buffer")
                  for n, s in zip(("global_scratch", "profile_scratch"), slots[len(params):])]
        self.program.slots = tuple(typed + hidden)
        self._call_params = [(n, t) for n, t in spec.signature if t != "constexpr"]
        self._drop = [i for i, (n, _) in enumerate(self._call_params) if n in spec.constants]

    @overload
    def __call__(self, *args: Any, grid: Sequence[int] = ..., wait: Literal[False] = ...,
                 timeout_ms: float | None = ..., **constexprs: Any) -> None: ...

    @overload
    def __call__(self, *args: Any, grid: Sequence[int] = ..., wait: Literal[True],
                 timeout_ms: float | None = ..., **constexprs: Any) -> float: ...

    @overload
    def __call__(self, *args: Any, grid: Sequence[int] = ..., wait: bool = ...,
                 timeout_ms: float | None = ..., **constexprs: Any) -> float | None: ...

    def __call__(self, *args: Any, grid: Sequence[int] = (1, 1, 1), wait: bool = False,
                 timeout_ms: float | None = None, **constexprs: Any) -> float | None:
        args = self._kernel_args(args, constexprs)
        gx, gy, gz = tuple(grid) + (1,) * (3 - len(grid))
        scratch = self._scratch(gx * gy * gz)
        try:
            return self.program(*args, 0 if scratch is None else scratch, 0,
                                global_size=(gx, gy, gz), local_size=self.block, wait=wait,
                                timeout_ms=timeout_ms)
        finally:
            if scratch is not None:  # back to the pool once the launch is done with it
                self.device.synchronize()
                self.device.free(scratch)

    def _kernel_args(self, args: tuple[Any, ...], constexprs: dict[str, Any]) -> tuple[Any, ...]:
        """The Triton call's arguments as the compiled kernel takes them (checked)."""
        spec = self.spec
        if len(args) != len(self._call_params):
            names = ", ".join(n for n, _ in self._call_params)
            raise ProgramError(f"{spec.name} takes {len(self._call_params)} arguments ({names}), "
                               f"got {len(args)}")
        for name, value in constexprs.items():
            if name not in spec.constants:
                raise ProgramError(f"{spec.name}: {name!r} is not a constexpr of the kernel")
            if spec.constants[name] != value:
                raise ProgramError(f"{spec.name} was compiled with {name}={spec.constants[name]!r},"
                                   f" got {value!r}: compile it again for that value")
        if self._drop:
            kept = []
            for i, (a, (name, _)) in enumerate(zip(args, self._call_params)):
                if i in self._drop:
                    if a != spec.constants[name]:
                        raise ProgramError(f"{spec.name}: argument {name!r} was specialised to "
                                           f"{spec.constants[name]!r} at compile time, got {a!r}")
                else:
                    kept.append(a)
            args = tuple(kept)
        return args

    def bind(self, *args: Any, grid: Sequence[int] = (1, 1, 1), **constexprs: Any) -> "Launch":
        """The launch `self(*args, grid=grid)` would make, as a `Launch` for a graph or a stream
        (`Stream.run`). Kernels that need global scratch are launched directly instead."""
        if self.spec.global_scratch_size:
            raise ProgramError(f"{self.spec.name} needs {self.spec.global_scratch_size} B of "
                               "global scratch per program: call it directly")
        from runtime.hcq.graph import Launch
        kernel_args = self._kernel_args(args, constexprs)
        gx, gy, gz = tuple(grid) + (1,) * (3 - len(grid))
        return Launch(self.program, (*kernel_args, 0, 0), (gx, gy, gz), self.block)

    def _scratch(self, programs: int) -> "Buffer | None":
        size = self.spec.global_scratch_size
        if not size:
            return None
        align = max(self.spec.global_scratch_align, 1)
        return self.device.alloc(-(-size // align) * align * programs)

    def __repr__(self) -> str:
        return f"TritonProgram({self.spec.name!r} on {self.device.name})"


def load_triton(device: "Device", source: Any, spec: TritonSpec | None = None) -> TritonProgram:
    """A Triton kernel on `device` from a `triton.compile` result, from a path saved by `save`
    (without suffix), or from (binary bytes, `spec`)."""
    if isinstance(source, (bytes, bytearray)):
        if spec is None:
            raise ProgramError("load_triton(device, binary) needs the kernel's TritonSpec")
        return TritonProgram(device, bytes(source), spec)
    # A GPU that executes PTX rather than SASS (the mock NVIDIA GPU) loads the kernel's PTX.
    fmt = getattr(device, "code_format", "")
    if isinstance(source, (str, Path)):
        binary, spec = load(source, fmt)
        return TritonProgram(device, binary, spec)
    binary, spec = spec_from_compiled(source)
    if fmt == "ptx" and spec.backend == "cuda":
        binary = source.asm["ptx"].encode()
    return TritonProgram(device, binary, spec)


#: Triton kernels shipped with the runtime for examples (docs/runtime.md): copies of what
#: scripts/build_triton_kernels.py builds into tests/runtime/data/triton, per architecture
EXAMPLES = Path(__file__).parent / "examples" / "triton"


def load_example(device: "Device", name: str) -> TritonProgram:
    """A Triton kernel shipped with the runtime ("vector_add", "softmax"), built for the
    device's architecture (gfx1100 or sm_90)."""
    arch = device.arch.replace("_", "")
    path = EXAMPLES / arch / name
    if not path.with_suffix(".json").is_file():
        have = sorted(f"{p.parent.name}/{p.stem}" for p in EXAMPLES.glob("*/*.json"))
        raise ProgramError(f"no example Triton kernel {name!r} for {device.arch} (shipped: "
                           f"{', '.join(have)})")
    return load_triton(device, path)
