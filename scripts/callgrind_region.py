"""Machine instructions of one region of a Python program, counted by valgrind's callgrind: a
figure that does not move with the machine's load or speed, for benchmarks on a shared machine.

The program runs under `valgrind --tool=callgrind --instr-atstart=no` (see `command`), so
nothing is counted until `region()` turns instrumentation on (callgrind's client requests, from
a small C helper built with the system's C compiler on first use) and after it turns it off:
imports, set-up and warm-up runs are not counted. Every thread of the process is counted while
the region runs. `collected(log)` reads the count from valgrind's log. Outside valgrind the
requests do nothing.

    with callgrind_region.region():
        work()
"""
import contextlib
import ctypes
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

_SOURCE = """#include <valgrind/callgrind.h>
void region_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void region_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""
_lib: ctypes.CDLL | None = None


def available() -> str:
    """Empty if counting can run here, else what is missing."""
    missing = [t for t in ("valgrind", "cc") if shutil.which(t) is None]
    if not Path("/usr/include/valgrind/callgrind.h").exists():
        missing.append("valgrind's headers (valgrind/callgrind.h)")
    return f"instruction counts need {', '.join(missing)}" if missing else ""


def _helper() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        tmp = Path(tempfile.mkdtemp(prefix="callgrind_region"))
        (tmp / "r.c").write_text(_SOURCE)
        subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(tmp / "r.so"),
                        str(tmp / "r.c")], check=True, capture_output=True)
        _lib = ctypes.CDLL(str(tmp / "r.so"))
        shutil.rmtree(tmp, ignore_errors=True)   # (the library stays mapped)
    return _lib


@contextlib.contextmanager
def region() -> Iterator[None]:
    """Counts the machine instructions run inside the `with` block (every thread)."""
    lib = _helper()
    lib.region_start()
    try:
        yield
    finally:
        lib.region_stop()


def command(log: Path, argv: list[str]) -> list[str]:
    """`argv` (a Python script and its arguments) run under callgrind, counting nothing until
    `region()`; the count goes to `log`."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--log-file={log}",
            f"--callgrind-out-file={log.with_suffix('.out')}", sys.executable, *argv]


def collected(log: Path) -> int:
    """The instructions counted in the run that wrote `log`."""
    m = re.search(r"Collected : (\d+)", log.read_text())
    if m is None:
        raise RuntimeError(f"no callgrind count in {log}: {log.read_text()[-400:]}")
    return int(m.group(1))
