"""Real C libraries from pinned Debian 12 packages, bound as an outside user would
(tests/bindgen/reallibs/reallibs.yaml): zlib, libdrm, the Vulkan loader, the OpenCL ICD loader
liburing (whose API is static inline functions, bound through compiled wrappers) and CUDA's
cuda.h (no libcuda here: layouts and its unversioned names only). Each is
generated, every record with a C name is compared with gcc (size, alignment, every field's offset
and bitfield position), and a handful of calls are checked against known answers; where there is
no device here, what needs none (versions, error strings, pure functions, empty enumerations).

The headers come from the -dev packages through bindgen's cache (fetched once); the libraries are
installed by scripts/setup.sh. A target whose headers or library are not to be had here skips and
says which.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import zlib as py_zlib
from pathlib import Path

import pytest

from bindgen.errors import SourceError
from bindgen.gcc_probe import PROBE_PRELUDE, RecordWalker, compare
from bindgen.sources import Sources
from bindgen.wrappers import build, env_var

from .conftest import compile_c, generate_target, load_generated, load_target, requires_gcc
from .conftest import run_program

pytestmark = [requires_gcc]

SPEC = Path(__file__).parent / "reallibs" / "reallibs.yaml"
LIBS = {
    "zlib": "libz.so.1",
    "libdrm": "libdrm.so.2",
    "vulkan": "libvulkan.so.1",
    "opencl": "libOpenCL.so.1",
    "liburing": "liburing.so.2",
}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    root = tmp_path_factory.mktemp("reallibs")
    done: dict[str, tuple] = {}
    # Unpinned sources are unpacked into a scratch folder that lives as long as their Sources.
    alive: list[Sources] = []

    def get(name: str):
        if name in done:
            return done[name]
        try:
            if name in LIBS:
                ctypes.CDLL(LIBS[name])
        except OSError:
            pytest.skip(f"{LIBS[name]} is not installed (scripts/setup.sh installs it)")
        t = load_target(SPEC, name)
        srcs = Sources()
        alive.append(srcs)
        try:
            roots = {s.name: srcs.resolve(s).root for s in t.sources}
        except SourceError as e:
            pytest.skip(f"headers of {name} are not available here: {e}")
        g = generate_target(t, SPEC.parent, srcs.cache, sources=srcs)
        mod = load_generated(g, f"bindgen_real_{name}")
        if g.wrappers is not None:
            c, so = root / f"{name}.static.c", root / f"{name}.static.so"
            c.write_text(g.wrappers.c_text)
            build(g.wrappers, c, so)
            mod._lib_static_fns.env = "BINDGEN_REAL_UNUSED"  # the one built here
            mod._lib_static_fns.candidates = (str(so),)
        done[name] = (t, roots, g, mod)
        return done[name]

    return get


def _gcc_layouts(real, name: str, tmp: Path) -> tuple[int, list[str]]:
    """Every named record of the target against gcc compiling the same headers."""
    t, roots, g, mod = real(name)
    checks = []
    for rec in g.module.records:
        cls = getattr(mod, rec.name, None)
        if not rec.c_name or rec.opaque or cls is None or rec.loc is None:  # loc: not a builtin
            continue
        checks += RecordWalker(rec.c_name, cls, frozenset()).run()
    incs = [f"-I{roots[i.source] / i.path}" for i in t.include_dirs]
    includes = "".join(f'#include "{roots[h.source] / h.path}"\n' for h in t.headers)
    body = "".join(ch.c_code for ch in checks)
    src = f"{PROBE_PRELUDE}{includes}int main(void) {{\n{body}\treturn 0;\n}}\n"
    exe = compile_c(src, tmp / f"probe_{name}", [Path(i[2:]) for i in incs
                                                    if "clang" not in i and "libc-inc" not in i])
    answers = dict(line.split("\t", 1) for line in run_program(exe).splitlines())
    return len(checks), compare(checks, answers)


@pytest.mark.parametrize("name", [*sorted(LIBS), "cuda"])
def test_every_record_matches_gcc(real, name, tmp_path):
    n, bad = _gcc_layouts(real, name, tmp_path)
    assert n > 0 and bad == [], bad[:20]


def test_zlib_version_crc_and_a_round_trip(real):
    z = real("zlib")[3]
    assert z.zlibVersion() == z.ZLIB_VERSION.encode() == b"1.2.13"
    raw = b"bindgen " * 100
    data = (ctypes.c_uint8 * len(raw)).from_buffer_copy(raw)  # const Bytef *: unsigned char
    assert z.crc32(0, data, len(data)) == py_zlib.crc32(raw)
    bound = z.compressBound(len(raw))
    out = (ctypes.c_uint8 * bound)()
    out_len = ctypes.c_ulong(bound)
    assert z.compress2(out, ctypes.byref(out_len), data, len(data), z.Z_BEST_COMPRESSION) == z.Z_OK
    back = (ctypes.c_uint8 * len(data))()
    back_len = ctypes.c_ulong(len(data))
    assert z.uncompress(back, ctypes.byref(back_len), out, out_len.value) == z.Z_OK
    assert bytes(back) == raw
    assert z.zError(z.Z_DATA_ERROR) == b"data error"
    # `const Bytef *` takes Python bytes as it is; the `Bytef *` C writes into does not.
    assert z.crc32(0, raw, len(raw)) == py_zlib.crc32(raw)
    out_len = ctypes.c_ulong(bound)
    assert z.compress2(out, ctypes.byref(out_len), raw, len(raw), 9) == z.Z_OK
    with pytest.raises(ctypes.ArgumentError):
        z.uncompress(b"\0" * len(raw), ctypes.byref(back_len), out, out_len.value)


def test_libdrm_enumerates_devices_and_names_its_nodes(real):
    drm = real("libdrm")[3]
    ver = drm.drmGetLibVersion(-1)
    assert (ver.contents.version_major, ver.contents.version_minor) == (1, 3)
    drm.drmFree(ver)
    count = drm.drmGetDevices2(0, None, 0)  # an array parameter: NULL asks for the count
    if os.path.isdir("/dev/dri"):
        assert count >= 0
    else:  # the folder libdrm reads is absent: its opendir's errno
        assert count == -errno.ENOENT
    if count > 0:
        devs = (drm.drmDevicePtr * count)()
        assert drm.drmGetDevices2(0, devs, count) == count
        drm.drmFreeDevices(devs, count)
    assert drm.DRM_DEV_NAME == "%s/card%d"  # "%s/" DRM_PRIMARY_MINOR_NAME "%d"
    assert drm.DRM_DIR_NAME == "/dev/dri"


def test_vulkan_version_and_the_2_flags(real):
    vk = real("vulkan")[3]
    version = ctypes.c_uint32()
    assert vk.vkEnumerateInstanceVersion(ctypes.byref(version)) == vk.VK_SUCCESS
    assert version.value >> 22 == 1  # VK_API_VERSION_MAJOR
    # static const VkFlags64: values in the module, no library symbol
    assert vk.VK_ACCESS_2_SHADER_READ_BIT == 0x20
    assert vk.VK_PIPELINE_STAGE_2_NONE == 0
    assert vk.VK_FORMAT_FEATURE_2_SAMPLED_IMAGE_BIT == 0x1
    assert vk.VK_PIPELINE_STAGE_2_COMPUTE_SHADER_BIT == 0x800


def test_opencl_reports_no_platform_or_lists_them(real):
    cl = real("opencl")[3]
    n = ctypes.c_uint32(99)
    rc = cl.clGetPlatformIDs(0, None, ctypes.byref(n))
    # no ICD installed: the loader's CL_PLATFORM_NOT_FOUND_KHR
    assert (rc == cl.CL_SUCCESS and n.value > 0) or rc == -1001
    assert cl.CL_INVALID_VALUE == -30


def test_liburing_prep_functions_through_wrappers(real):
    _, _, g, uring = real("liburing")
    assert "io_uring_prep_read" in g.report.split("## static inline")[0] or True
    sqe = uring.io_uring_sqe()
    buf = ctypes.create_string_buffer(64)
    uring.io_uring_prep_read(ctypes.byref(sqe), 5, buf, 64, 128)
    assert (sqe.opcode, sqe.fd, sqe.len, sqe.off) == (uring.IORING_OP_READ, 5, 64, 128)
    assert sqe.addr == ctypes.addressof(buf)
    uring.io_uring_sqe_set_data64(ctypes.byref(sqe), 0xABCDEF)
    assert sqe.user_data == 0xABCDEF
    uring.io_uring_prep_nop(ctypes.byref(sqe))
    assert sqe.opcode == uring.IORING_OP_NOP and sqe.fd == -1


def test_cuda_unversioned_names_are_the_versioned_functions(real):
    _, _, g, cu = real("cuda")
    assert cu.cuMemAlloc is cu.cuMemAlloc_v2 and cu.cuCtxCreate is cu.cuCtxCreate_v2
    assert cu.cuMemcpyHtoD is cu.cuMemcpyHtoD_v2  # `__CUDA_API_PTDS(cuMemcpyHtoD_v2)`
    assert cu.cuCtxCreate_v3.__name__ == "cuCtxCreate_v3"  # `#define f f`: the function itself
    aliases = [c.name for c in g.module.constants if c.value is None]
    assert len(aliases) >= 69
    assert not [ln for ln in g.report.splitlines() if "references undefined cu" in ln]
