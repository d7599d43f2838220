"""The 30 hardest headers of the uapi sweep (scripts/uapi_sweep.py), against gcc on every run.

"Hardest" is the sweep's measure (``uapi_sweep.hardness``: bitfields, anonymous members, packed and
over-aligned records, function-like macros), from the full run recorded in docs/benchmarks.md. The
headers are read from the kernel source that bindgen/specs/linux.yaml pins (linux-source-6.1
6.1.176-1, resolved through the bindgen source cache as the linux targets are), each generated on
its own and compared with gcc record by record, bitfield by bitfield and macro by macro.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from .conftest import REPO, requires_gcc

pytestmark = [requires_gcc]

SAMPLE = (
    "linux/videodev2.h", "linux/cdrom.h", "linux/comedi.h", "linux/usb/ch9.h",
    "linux/perf_event.h", "linux/pci_regs.h", "linux/btrfs_tree.h", "linux/bpf.h", "linux/kvm.h",
    "sound/asoc.h", "asm/bootparam.h", "linux/usb/video.h", "linux/usb/cdc.h",
    "linux/byteorder/big_endian.h", "linux/byteorder/little_endian.h", "linux/pfkeyv2.h",
    "rdma/ib_user_verbs.h", "linux/idxd.h", "drm/drm_fourcc.h", "linux/lirc.h",
    "sound/skl-tplg-interface.h", "drm/i915_drm.h", "linux/edd.h", "sound/compress_offload.h",
    "linux/ioam6.h", "linux/in.h", "sound/asound.h", "linux/hyperv.h", "sound/emu10k1.h",
    "linux/rkisp1-config.h",
)

# Inputs of function-like macros that are undefined behaviour in C are set aside by the probe
# (gcc refuses them under -Werror), as are members C cannot assign (const): nothing else may be.
ALLOWED_SET_ASIDE = ("shift", "read-only")


def _sweep_module():
    path = REPO / "scripts" / "uapi_sweep.py"
    spec = importlib.util.spec_from_file_location("uapi_sweep", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["uapi_sweep"] = mod  # dataclasses resolve their module by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sample_results(tmp_path_factory):
    sweep = _sweep_module()
    work = tmp_path_factory.mktemp("uapi")
    env = sweep.make_env(work)
    by_name = {sweep.short(h): h for h in sweep.list_headers(env)}
    missing = [h for h in SAMPLE if h not in by_name]
    assert not missing, f"not in the pinned uapi tree: {missing}"
    results = sweep.run_sweep(env, [by_name[h] for h in SAMPLE], 2, work)
    return {r.header: r for r in results}


def test_sample_is_fixed_and_large_enough():
    assert len(set(SAMPLE)) == len(SAMPLE) >= 30


@pytest.mark.parametrize("header", SAMPLE)
def test_uapi_header_matches_gcc(header, sample_results):
    r = sample_results[header]
    assert r.status == "ok", f"{header}: {r.status}: {r.detail}\n" + "\n".join(r.mismatches[:20])
    assert not r.mismatches
    assert sum(r.checks.values()) >= 50, r.checks  # the probe really compared things
    odd = [(k, why) for k, why in r.unprobed if not any(a in why for a in ALLOWED_SET_ASIDE)]
    assert not odd, odd
    assert all(s[3] for s in r.skipped), "every declaration not emitted has a reason"
