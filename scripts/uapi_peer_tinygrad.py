"""tinygrad's autogen on the uapi sweep's headers, scored against the same gcc answers.

Used by ``scripts/uapi_sweep.py --tinygrad DIR`` (DIR: a tinygrad checkout, for reference and
side-by-side runs only; nothing of it is copied). For each header bindgen generated, a worker
process with DIR on its path calls ``tinygrad.runtime.support.autogen.gen`` with the include
folders and definitions bindgen got, executes the module text, and scores it with the gcc output
of bindgen's probe for that header:

* a header *generates* when ``gen`` returns and the module text executes;
* a record *matches* when its size, every member offset gcc printed for it (members and promoted
  members of anonymous ones), every bitfield's bytes after writing -1 (or all ones) through the
  class and every bitfield read back from gcc's bytes agree; alignment is counted apart;
* a macro *matches* when the module's value equals gcc's (integer macros, ioctl numbers, and
  function-like macros at the probe's inputs); tinygrad's ioctls are ``functools.partial``
  objects, whose request number is computed from their arguments as its ``_do_ioctl`` does.

Records are looked up as tinygrad names them (``struct_foo``, ``union_foo``, typedef names).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKER = r'''
import contextlib, ctypes, io, json, re, signal, sys, time, types
job = json.load(open(sys.argv[1]))
from tinygrad.runtime.support.autogen import gen

class Timeout(Exception):
    pass

def alarm(*_):
    raise Timeout()

signal.signal(signal.SIGALRM, alarm)

def cls_of(mod, t):
    word, _, tag = t.partition(" ")
    return getattr(mod, f"{word}_{tag}" if tag else t, None)

def num(s):
    return float(s[1:]) if s.startswith("f") else int(s)

def request_number(v):
    """tinygrad's ioctls are partial(_do_ioctl, dir, type, nr, struct): their request number."""
    if getattr(getattr(v, "func", None), "__name__", "") == "_do_ioctl":
        d, base, nr, st = v.args[:4]
        return (d << 30) | ((ctypes.sizeof(st) if st is not None else 0) << 16) | (base << 8) | nr
    return v

def score(mod, truth):
    recs = {}
    for key, v in truth.items():
        kind, _, rest = key.partition(" ")
        if kind in ("size", "align"):
            recs.setdefault(rest, {})[kind] = int(v)
    out = {"records": len(recs), "records_ok": 0, "align_ok": 0, "macros": 0, "macros_ok": 0,
           "bad": []}
    for t, facts in recs.items():
        cls = cls_of(mod, t)
        ok = cls is not None
        try:
            if ok and ctypes.sizeof(cls) != facts["size"]:
                ok = False
            if cls is not None and ctypes.alignment(cls) == facts.get("align"):
                out["align_ok"] += 1
            fields = {f[0]: f for f in getattr(cls, "_real_fields_", [])} if ok else {}
            for key, v in truth.items():
                kind, _, rest = key.partition(" ")
                if not ok or not rest.startswith(t + "."):
                    continue
                member = rest[len(t) + 1:]
                if "." in member or "[" in member:
                    continue
                f = fields.get(member) or fields.get("_" + member)  # tinygrad's `in` is `_in`
                if kind == "off":
                    ok = f is not None and f[2] == int(v)
                elif kind == "bits":
                    val = int(truth[f"val {rest}"])
                    width, name = f[3], f[0]
                    o = cls()
                    setattr(o, name, -1 if val < 0 else (1 << width) - 1)
                    ok = bytes(o).hex() == v
                    if ok:
                        back = cls.from_buffer_copy(bytes.fromhex(v))
                        ok = getattr(back, name) == val
        except Exception as e:
            ok = False
            out["bad"].append(f"{t}: {type(e).__name__}: {e}"[:160])
        if ok:
            out["records_ok"] += 1
        elif len(out["bad"]) < 8:
            out["bad"].append(f"record {t}")
    for key, v in truth.items():
        kind, _, rest = key.partition(" ")
        if kind not in ("const", "macro"):
            continue
        out["macros"] += 1
        try:
            if kind == "const":
                got = getattr(mod, rest)
            else:
                name, _, args = rest.partition("(")
                got = getattr(mod, name)(*[int(a) for a in args.rstrip(")").split(", ") if a])
            got = request_number(got)
            if got == num(v):
                out["macros_ok"] += 1
            elif len(out["bad"]) < 8:
                out["bad"].append(f"{rest}: gcc {v}, tinygrad {got!r}"[:160])
        except Exception as e:
            if len(out["bad"]) < 8:
                out["bad"].append(f"{rest}: {type(e).__name__}: {e}"[:160])
    return out

for item in job["headers"]:
    res = {"header": item["header"]}
    t0 = time.perf_counter()
    signal.alarm(60)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            text = gen("uapi", [item["path"]], args=job["args"])
        res["gen_s"] = time.perf_counter() - t0
        mod = types.ModuleType("tg_" + re.sub(r"\W", "_", item["header"]))
        exec(compile(text, mod.__name__, "exec"), mod.__dict__)
        res["generated"] = True
        res.update(score(mod, item["truth"]))
    except Timeout:
        res.update(generated=False, error="timed out after 60 s")
    except BaseException as e:
        res.update(generated=False, error=f"{type(e).__name__}: {e}"[:300])
    finally:
        signal.alarm(0)
    print("@@" + json.dumps(res), flush=True)
'''


def score_tinygrad(
    tinygrad: Path, env: Any, headers: list, results: list, work: Path, jobs: int = 2
) -> dict[str, Any]:
    """Runs tinygrad on every header bindgen generated; per-header results and totals."""
    import clang.cindex as ci

    from uapi_sweep import INSTALL_DEFINES, short

    paths = {short(h): str(Path(env.roots[h.source]) / h.path) for h in headers}
    items = [
        {"header": r.header, "path": paths[r.header], "truth": r.truth}
        for r in results
        if r.status in ("ok", "mismatch")
    ]
    args = ["-nostdinc", "--target=x86_64-linux-gnu", "-std=gnu11", *INSTALL_DEFINES,
            *env.include_flags()]
    worker = work / "tinygrad_worker.py"
    worker.write_text(WORKER)
    libclang = Path(ci.__file__).parent / "native" / "libclang.so"  # the one bindgen uses
    environ = dict(os.environ, PYTHONPATH=str(tinygrad), LIBCLANG_PATH=str(libclang))
    procs = []
    for i in range(jobs):
        job = work / f"tinygrad_job{i}.json"
        job.write_text(json.dumps({"args": args, "headers": items[i::jobs]}))
        procs.append(
            subprocess.Popen(
                [sys.executable, str(worker), str(job)],
                env=environ,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=work,
            )
        )
    per: list[dict[str, Any]] = []
    for p in procs:
        out, _ = p.communicate()
        per += [json.loads(ln[2:]) for ln in out.splitlines() if ln.startswith("@@")]
    done = {r["header"] for r in per}
    per += [{"header": it["header"], "generated": False, "error": "worker died"}
            for it in items if it["header"] not in done]
    per.sort(key=lambda r: r["header"])
    total: dict[str, Any] = {"headers": len(items)}
    total["generated"] = sum(bool(r.get("generated")) for r in per)
    for k in ("records", "records_ok", "align_ok", "macros", "macros_ok"):
        total[k] = sum(r.get(k, 0) for r in per)
    total["gen_s"] = round(sum(r.get("gen_s", 0.0) for r in per), 2)
    errors: dict[str, int] = {}
    for r in per:
        if r.get("error"):
            kind = r["error"].split(":")[0]
            errors[kind] = errors.get(kind, 0) + 1
    total["errors_by_kind"] = errors
    return {"total": total, "headers": per}


def ours_on_the_same_scale(results: list) -> dict[str, Any]:
    """bindgen's own numbers scored the way tinygrad's are (records whole, macros by value)."""
    recs = ok = macros = macros_ok = 0
    for r in results:
        if r.status not in ("ok", "mismatch"):
            continue
        bad = {m.split(": ")[0].split(" ", 1)[1] for m in r.mismatches}
        names = {k.split(" ", 1)[1] for k in r.truth if k.startswith("size ")}
        recs += len(names)
        ok += sum(not any(b == n or b.startswith(n + ".") for b in bad) for n in names)
        mk = [k for k in r.truth if k.startswith(("const ", "macro "))]
        macros += len(mk)
        macros_ok += sum(k.split(" ", 1)[1] not in bad for k in mk)
    return {"records": recs, "records_ok": ok, "macros": macros, "macros_ok": macros_ok}
