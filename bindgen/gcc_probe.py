"""gcc as the truth for generated bindings: C probe programs and the comparison with Python.

A probe is one C program per header. For every record it prints sizeof, _Alignof, the offsetof and
sizeof of every member (nested and promoted ones too), and for every bitfield and integer member
the bytes of a zeroed object after setting the member to -1 and the value read back; for integer
macros their value in their own C type; for function-like macros their value at a few integer
arguments. The Python side does the same through the generated module: a bitfield is written
through the class and its bytes compared with gcc's, then gcc's bytes are read back through the
class (negatives included).

Used by the test suite (tests/bindgen) and by scripts/uapi_sweep.py. Checks whose C code does not
compile (a macro that is not an integer expression, a shift that is undefined for the chosen
arguments) are set aside with gcc's message, never counted as passing.
"""

from __future__ import annotations

import ctypes
import keyword
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from .passes.naming import py_ident  # the generated (Python) spelling of a C identifier

# ---------------------------------------------------------------- names and types


def max_ctypes_align() -> int:
    """The largest alignment a ctypes type can have on this Python."""
    from .layout import MAX_CTYPES_ALIGN

    return MAX_CTYPES_ALIGN if sys.version_info < (3, 13) else 1 << 30


def c_ident(py_name: str) -> str:
    """The C spelling of a generated field name (keywords got a trailing underscore)."""
    if py_name.endswith("_"):
        base = py_name[:-1]
        if keyword.iskeyword(base) or base in ("None", "True", "False"):
            return base
    return py_name


_INT_CODES = set("bBhHiIlLqQ?")


def is_record(t: Any) -> bool:
    return isinstance(t, type) and hasattr(t, "__bindgen_fields__")


def is_int(t: Any) -> bool:
    return (
        isinstance(t, type)
        and issubclass(t, ctypes._SimpleCData)
        and getattr(t, "_type_", None) in _INT_CODES
    )


def is_array(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, ctypes.Array)


# ---------------------------------------------------------------- checks


@dataclass
class Check:
    """One comparison: ``c_code`` prints ``key<TAB>value`` lines; ``py`` turns gcc's output into
    (gcc's value, Python's value)."""

    kind: str  # size | align | off | fsize | falign | bits | val | const | macro_fn
    key: str  # also the line tag the C program prints
    c_code: str  # statements printing "key\tvalue" (one line)
    py: Callable[[dict[str, str]], tuple[Any, Any]]


def _hexdump(obj: Any) -> str:
    return bytes(obj).hex()


def _get(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p] if isinstance(p, int) else getattr(obj, p)
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    parent = _get(obj, path[:-1])
    if isinstance(path[-1], int):
        parent[path[-1]] = value
    else:
        setattr(parent, path[-1], value)


def _answer(
    key: str, ours: Callable[[], int], cap: int | None = None
) -> Callable[[dict[str, str]], tuple[Any, Any]]:
    """A check's comparison: gcc's integer for ``key`` (capped at what ctypes can express) and
    Python's."""

    def py(c: dict[str, str]) -> tuple[Any, Any]:
        want = int(c[key])
        return (want if cap is None else min(want, cap)), ours()

    return py


class RecordWalker:
    """Turns one generated record class (and what it contains) into checks against gcc.

    ``ctype_c`` is the record's C spelling (``struct foo`` or a typedef name); ``scalars`` names
    members that C holds as scalars and Python as arrays (``__int128``).
    """

    def __init__(self, ctype_c: str, cls: Any, scalars: frozenset[str] = frozenset()) -> None:
        self.T, self.cls, self.scalars = ctype_c, cls, scalars
        self.checks: list[Check] = []
        self.maxa = max_ctypes_align()

    def obj_block(self, body: str) -> str:
        return f"\t{{ {self.T} o; __builtin_memset(&o, 0, sizeof o); {body} }}\n"

    def run(self) -> list[Check]:
        T, cls, maxa = self.T, self.cls, self.maxa
        self.checks.append(
            Check(
                "size",
                f"size {T}",
                f'\tOUT("size {T}", sizeof({T}));\n',
                lambda c: (int(c[f"size {T}"]), ctypes.sizeof(cls)),
            )
        )
        self.checks.append(
            Check(
                "align",
                f"align {T}",
                f'\tOUT("align {T}", _Alignof({T}));\n',
                lambda c: (min(int(c[f"align {T}"]), maxa), ctypes.alignment(cls)),
            )
        )
        self.walk(cls, "", (), 0)
        return self.checks

    def walk(self, cls: Any, cprefix: str, pypath: tuple, base: int) -> None:
        """``base``: python's byte offset of ``cls`` inside the top-level object."""
        for name, ctype, _bit_offset, width, signed, anonymous in cls.__bindgen_fields__:
            if width is not None:
                if width == 0:
                    continue  # zero-width ones only move others: those are checked
                self.bitfield(
                    cprefix + "." + c_ident(name) if cprefix else c_ident(name),
                    pypath + (name,),
                    signed,
                    width,
                )
                continue
            actual = getattr(cls, name).offset  # where ctypes really put it
            if anonymous:
                # C promotes the members (and so do the generated classes): same prefixes.
                self.walk(ctype, cprefix, pypath, base + actual)
                continue
            cp = cprefix + "." + c_ident(name) if cprefix else c_ident(name)
            self.member(cp, pypath + (name,), ctype, base + actual)

    def member(self, cp: str, pypath: tuple, ctype: Any, off: int) -> None:
        """``off``: python's byte offset of this member inside the top-level object."""
        T, key = self.T, f"{self.T}.{cp}"
        self.checks.append(
            Check(
                "off",
                f"off {key}",
                f'\tOUT("off {key}", offsetof({T}, {cp}));\n',
                _answer(f"off {key}", lambda: off),
            )
        )
        flexible = is_array(ctype) and ctype._length_ == 0
        if not flexible:
            self.checks.append(
                Check(
                    "fsize",
                    f"fsize {key}",
                    f'\tOUT("fsize {key}", sizeof((({T} *)0)->{cp}));\n',
                    _answer(f"fsize {key}", lambda: ctypes.sizeof(ctype)),
                )
            )
        if is_record(ctype):
            maxa = self.maxa
            self.checks.append(
                Check(
                    "falign",
                    f"falign {key}",
                    f'\tOUT("falign {key}", _Alignof(__typeof__((({T} *)0)->{cp})));\n',
                    _answer(f"falign {key}", lambda: ctypes.alignment(ctype), maxa),
                )
            )
            self.walk(ctype, cp, pypath, off)
        elif is_array(ctype) and not flexible and cp.rpartition(".")[2] not in self.scalars:
            last = ctype._length_ - 1  # the last element checks the stride too
            elem = ctype._type_
            self.member(f"{cp}[{last}]", pypath + (last,), elem, off + last * ctypes.sizeof(elem))
        elif is_int(ctype):
            self.int_value(cp, pypath, ctype)

    def int_value(self, cp: str, pypath: tuple, ctype: Any) -> None:
        """Plain integer (or enum) member: all-ones from C must read back with C's sign."""
        key = f"{self.T}.{cp}"
        body = f'o.{cp} = -1; DUMP("set {key}", &o, sizeof o); IVAL("val {key}", o.{cp});'
        cls = self.cls

        def py(c: dict[str, str], key: str = key, path: tuple = pypath) -> tuple[Any, Any]:
            try:
                got = _get(cls.from_buffer_copy(bytes.fromhex(c[f"set {key}"])), path)
            except ValueError as e:
                got = f"cannot read gcc's bytes: {e}"
            return int(c[f"val {key}"]), int(got) if isinstance(got, (int, bool)) else got

        self.checks.append(Check("val", f"val {key}", self.obj_block(body), py))

    def bitfield(self, cp: str, pypath: tuple, signed: bool, width: int) -> None:
        key = f"{self.T}.{cp}"
        body = f'o.{cp} = -1; DUMP("bits {key}", &o, sizeof o); IVAL("val {key}", o.{cp});'
        cls = self.cls

        def py_bits(c: dict[str, str], key: str = key, path: tuple = pypath) -> tuple[Any, Any]:
            obj = cls()
            _set(obj, path, -1 if signed else (1 << width) - 1)
            return c[f"bits {key}"], _hexdump(obj)

        def py_val(c: dict[str, str], key: str = key, path: tuple = pypath) -> tuple[Any, Any]:
            try:
                got = _get(cls.from_buffer_copy(bytes.fromhex(c[f"bits {key}"])), path)
            except ValueError as e:
                got = f"cannot read gcc's bytes: {e}"
            return int(c[f"val {key}"]), got

        self.checks.append(Check("bits", f"bits {key}", self.obj_block(body), py_bits))
        self.checks.append(Check("val", f"val {key}", "", py_val))


def _number(text: str) -> int | float:
    return float(text[1:]) if text.startswith("f") else int(text)


def constant_check(name: str, value: Any) -> Check:
    """An object-like macro: C's value of ``name`` in its own type (unsigned types print
    unsigned) against the generated constant."""
    key = f"const {name}"
    return Check(
        "const",
        key,
        f'\tNVAL("{key}", ({name}));\n',
        lambda c: (_number(c[key]), value if not isinstance(value, bool) else int(value)),
    )


# Arguments for function-like macros, written as C decimal literals so that C gives each the
# type Python's translation assumes for a plain int argument (int, else long).
MACRO_ARGS = (0, 1, 7, -1, 4096, 4294967296)


def macro_fn_checks(name: str, nparams: int, fn: Callable[..., Any]) -> list[Check]:
    """A few integer inputs of a translated function-like macro against C's expansion."""
    out = []
    rows = [
        tuple(MACRO_ARGS[(i + j) % len(MACRO_ARGS)] for j in range(nparams))
        for i in range(len(MACRO_ARGS) if nparams else 1)
    ]
    for args in rows:
        c_args = ", ".join(f"({a})" if a >= 0 else f"({a})" for a in args)
        key = f"macro {name}({', '.join(map(str, args))})"

        def py(c: dict[str, str], key: str = key, args: tuple = args) -> tuple[Any, Any]:
            try:
                got = fn(*args)
            except Exception as e:  # C computed a value: a Python error is a mismatch
                got = f"raised {type(e).__name__}: {e}"
            return _number(c[key]), int(got) if isinstance(got, bool) else got

        out.append(Check("macro_fn", key, f'\tNVAL("{key}", {name}({c_args}));\n', py))
    return out


def module_checks(mod: Any, m: Any) -> list[Check]:
    """Every check for a generated module ``mod`` and the IR ``m`` it came from: each named record
    (nested anonymous ones through their parent), each integer constant and ioctl number, a few
    inputs of each function-like macro."""
    checks: list[Check] = []
    for rec in m.records:
        cls = getattr(mod, rec.name, None)
        if not rec.opaque and rec.c_name and cls is not None:
            checks += RecordWalker(rec.c_name, cls).run()
    for c in m.constants:
        if isinstance(c.value, (int, float)) and not isinstance(c.value, bool):
            checks.append(constant_check(c.name, getattr(mod, c.name)))
    for io in m.ioctls:
        checks.append(constant_check(io.name, int(getattr(mod, io.name))))
    for f in m.macro_functions:
        checks += macro_fn_checks(f.name, len(f.params), getattr(mod, f.name))
    return checks


# No library headers: the probe sees exactly what the header defines on its own (glibc's stdio.h
# would define __GLIBC__ first, and linux/stat.h hides its S_IF* macros from glibc users).
PROBE_PRELUDE = r"""#ifndef offsetof
#define offsetof(t, m) __builtin_offsetof(t, m)
#endif
#define OUT(key, v) __builtin_printf("%s\t%llu\n", key, (unsigned long long)(v))
#define IVAL(key, v) do { if ((v) < 0) __builtin_printf("%s\t%lld\n", key, (long long)(v)); \
	else __builtin_printf("%s\t%llu\n", key, (unsigned long long)(v)); } while (0)
#define IS_FLOAT(v) _Generic((v), float: 1, double: 1, long double: 1, default: 0)
#define NVAL(key, v) do { if (IS_FLOAT(v)) __builtin_printf("%s\tf%.17g\n", key, (double)(v)); \
	else IVAL(key, v); } while (0)
static void DUMP(const char *key, const void *p, __SIZE_TYPE__ n) {
	__builtin_printf("%s\t", key);
	for (__SIZE_TYPE__ i = 0; i < n; i++) __builtin_printf("%02x", ((const unsigned char *)p)[i]);
	__builtin_printf("\n");
}
"""

# Undefined behaviour in a probe expression (a shift by the width, a signed overflow, a division by
# zero for the chosen arguments) and calls of undeclared functions (a macro naming something the
# header never declares) become compile errors: such checks are set aside, not compared.
REJECT_ERRORS = (
    "-Werror=implicit-function-declaration",
    "-Werror=div-by-zero",
    "-Werror=shift-count-negative",
    "-Werror=shift-count-overflow",
    "-Werror=overflow",
    "-Werror=shift-negative-value",
)


def program(includes: Sequence[str], checks: Sequence[Check]) -> tuple[str, dict[int, int]]:
    """The probe's C source and, for each source line holding a check, that check's index."""
    lines = [f"#include <{h[1:-1]}>" if h.startswith("<") else f'#include "{h}"' for h in includes]
    lines += PROBE_PRELUDE.rstrip("\n").split("\n")
    lines.append("int main(void) {")
    where: dict[int, int] = {}
    for i, ch in enumerate(checks):
        if ch.c_code:
            lines.append(ch.c_code.strip("\n").replace("\n", " "))
            where[len(lines)] = i
    lines += ["\treturn 0;", "}"]
    return "\n".join(lines) + "\n", where


_DIAG = re.compile(r"^(?P<file>[^:\s]+):(?P<line>\d+):\d+: (?P<sev>error|warning|note): (?P<msg>.*)")


def _error_lines(stderr: str, source_name: str) -> dict[int, str]:
    """Probe source lines that an error points at (directly or through a macro expansion)."""
    out: dict[int, str] = {}
    current: str | None = None
    for line in stderr.splitlines():
        m = _DIAG.match(line)
        if not m:
            continue
        sev, msg = m["sev"], m["msg"]
        if sev == "error":
            current = msg
        elif sev == "warning":
            current = None
        if current is not None and Path(m["file"]).name == source_name:
            out.setdefault(int(m["line"]), current)
    return out


@dataclass
class ProbeResult:
    gcc: dict[str, str]  # key -> value printed by the program
    unprobed: dict[int, str] = field(default_factory=dict)  # check index -> gcc's reason
    error: str | None = None  # the probe could not be built or run at all


def run_probe(
    includes: Sequence[str],
    checks: Sequence[Check],
    workdir: Path,
    cflags: Sequence[str] = (),
    stem: str = "probe",
    gcc: str = "gcc",
    max_rounds: int = 30,
) -> ProbeResult:
    """Builds and runs the probe, setting aside checks whose code gcc rejects (their source lines
    are removed and the program rebuilt while that makes progress, at most ``max_rounds`` times:
    gcc names an undeclared function only at its first use in a function)."""
    workdir.mkdir(parents=True, exist_ok=True)
    active = list(range(len(checks)))
    unprobed: dict[int, str] = {}
    src_path, exe = workdir / f"{stem}.c", workdir / stem
    for _ in range(max_rounds):
        text, where = program(includes, [checks[i] for i in active])
        src_path.write_text(text)
        r = subprocess.run(
            [gcc, "-std=gnu11", "-O0", *REJECT_ERRORS, *cflags, str(src_path), "-o", str(exe)],
            capture_output=True,
            text=True,
        )
        if r.returncode == 0:
            break
        bad = _error_lines(r.stderr, src_path.name)
        drop = {where[ln]: msg for ln, msg in bad.items() if ln in where}
        if not drop:
            first = next((ln for ln in r.stderr.splitlines() if ": error:" in ln), r.stderr[-300:])
            return ProbeResult({}, unprobed, f"probe does not compile: {first.strip()}")
        for j, msg in drop.items():
            unprobed[active[j]] = msg
        active = [a for j, a in enumerate(active) if j not in drop]
    else:
        return ProbeResult({}, unprobed, f"probe still fails after {max_rounds} rounds")
    try:
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return ProbeResult({}, unprobed, "probe timed out")
    if run.returncode:
        return ProbeResult({}, unprobed, f"probe exited {run.returncode}: {run.stderr[-300:]}")
    out: dict[str, str] = {}
    for line in run.stdout.splitlines():
        k, _, v = line.partition("\t")
        out[k] = v
    return ProbeResult(out, unprobed)


def compare(
    checks: Sequence[Check], gcc: dict[str, str], kinds: set[str] | None = None
) -> list[str]:
    """Mismatches as readable lines (empty when python agrees with gcc everywhere)."""
    bad = []
    for ch in checks:
        if kinds and ch.kind not in kinds:
            continue
        try:
            want, got = ch.py(gcc)
        except KeyError as e:
            bad.append(f"{ch.key}: gcc printed no {e}")
            continue
        except Exception as e:  # a generated class that cannot even be used is a mismatch too
            bad.append(f"{ch.key}: python raised {type(e).__name__}: {e}")
            continue
        if want != got:
            bad.append(f"{ch.key}: gcc {want!r}, python {got!r}")
    return bad
