"""C APIs as C means them, called through a gcc-built library: array parameters adjusted to
pointers, ``static const`` variables as constants, tags beside ordinary identifiers of the same
name, Python keywords as C names, tags nested in records, typedef chains, incomplete enums and
functions declared through function typedefs. Layouts are compared with gcc."""

from __future__ import annotations

import ctypes

import pytest

from .conftest import CORPUS, compare, compile_c, generate_headers, requires_gcc, run_layout_probe

pytestmark = [requires_gcc]

IMPL = r"""
#include "c_api.h"
int sum_arr(const int a[], int n) { int t = 0; if (!a) return -1; for (int i = 0; i < n; i++)
t += a[i]; return t; }
int sum4(int a[4]) { return a[0] + a[1] + a[2] + a[3]; }
int sum_rows(int m[][3], int rows) { int t = 0; for (int r = 0; r < rows; r++) t += m[r][0] * 100
+ m[r][1] * 10 + m[r][2]; return t; }
int sum_ptrs(int *ps[], int n) { int t = 0; for (int i = 0; i < n; i++) t += *ps[i]; return t; }
int sum_vec(vec3 v) { return v[0] + v[1] + v[2]; }
int apply(int f(int), int x) { return f(x); }
int st(struct st *p) { return p->x * 2; }
int lambda(int x) { return x + 1000; }
int as = 7;
int baz_x(struct baz *p) { return p->x; }
int foo_a(foo *p) { return p->a; }
int twice(int x) { return 2 * x; }
int str_len(const char *s) { int n = 0; if (!s) return -1; while (s[n]) n++; return n; }
int scale_v2(int x) { return 2 * x; }
int add_v3(int a, int b) { return a + b; }
#include <stdlib.h>
struct msg *msg_new(int n) { struct msg *m = malloc(sizeof *m + n * sizeof(int)); m->n = n;
for (int i = 0; i < n; i++) m->data[i] = 10 * i; return m; }
int msg_sum(const struct msg *m) { int t = 0; for (int i = 0; i < m->n; i++) t += m->data[i];
return t; }
void msg_free(struct msg *m) { free(m); }
void wide_set(struct wide *w) { w->s = -((__int128)1 << 100) - 3; w->u = ((unsigned __int128)1 << 127)
+ 7; }
unsigned long long wide_low(const struct wide *w) { return (unsigned long long)(w->s + w->u); }
__int128 wide_by_value(__int128 x) { return x; }
unsigned sum_bytes(const unsigned char *p, int n) { unsigned t = 0; for (int i = 0; i < n; i++)
t += p[i]; return t; }
unsigned sum_u8(const uint8_t *p, int n) { return sum_bytes(p, n); }
int sum_s8(const signed char p[], int n) { int t = 0; for (int i = 0; i < n; i++) t += p[i];
return t; }
unsigned sum_cbyte(cbyte *p, int n) { return sum_bytes(p, n); }
int first_byte(const void *p) { return *(const unsigned char *)p; }
void fill_bytes(unsigned char *p, int n, unsigned char v) { for (int i = 0; i < n; i++) p[i] = v; }
"""


@pytest.fixture(scope="module")
def capi(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("capi")
    lib = compile_c(IMPL, tmp / "lib" / "libcapi.so", [CORPUS], shared=True)
    g, mod = generate_headers(
        tmp,
        ["c_api.h"],
        name="c_api",
        libraries=[{"name": "capi", "candidates": [str(lib)]}],
    )
    return g, mod


@pytest.fixture(scope="module")
def api(capi):
    return capi[1]


def test_layouts_match_gcc(api, tmp_path):
    checks, answers = run_layout_probe(CORPUS / "c_api.h", api, tmp_path)
    assert len(checks) > 10 and compare(checks, answers) == []


def test_array_parameters_are_pointers(api):
    three = (ctypes.c_int * 3)(1, 2, 3)
    assert api.sum_arr(three, 3) == 6
    assert api.sum_arr(None, 0) == -1  # NULL is a valid pointer argument
    assert api.sum_arr(ctypes.cast(three, ctypes.POINTER(ctypes.c_int)), 2) == 3
    assert api.sum4((ctypes.c_int * 4)(1, 2, 3, 4)) == 10
    assert api.sum4((ctypes.c_int * 8)(*range(8))) == 6  # any length: C never checks it
    assert api.sum_vec(three) == 6


def test_array_of_arrays_and_of_pointers(api):
    rows = ((ctypes.c_int * 3) * 2)((1, 2, 3), (4, 5, 6))
    assert api.sum_rows(rows, 2) == 123 + 456
    a, b = ctypes.c_int(40), ctypes.c_int(2)
    ptrs = (ctypes.POINTER(ctypes.c_int) * 2)(ctypes.pointer(a), ctypes.pointer(b))
    assert api.sum_ptrs(ptrs, 2) == 42


def test_function_parameter_is_a_function_pointer(api):
    cb = api.apply.argtypes[0](lambda x: x * 3)
    assert api.apply(cb, 14) == 42


def test_static_consts_are_module_constants(api, capi):
    assert api.FLAG_X == 0x2000
    assert api.FLAG_TOP == 1 << 63
    assert api.NEG == -5
    assert api.HALF == 0.5
    assert api.DEV_NAME == b"card"
    assert "static const unsigned long long" in capi[0].text
    assert not hasattr(api, "counter_copy")
    assert "variable counter_copy: static variable that is not const" in capi[0].report


def test_tag_and_function_of_one_name_are_both_usable(api):
    assert isinstance(api.struct_st, type) and ctypes.sizeof(api.struct_st) == 4
    assert api.st(ctypes.byref(api.struct_st(x=21))) == 42


def test_python_keywords_keep_their_c_symbol(api):
    assert api.lambda_(1) == 1001
    assert api.as_().value == 7


def test_tag_nested_in_a_record_has_file_scope(api):
    assert api.baz_x(ctypes.byref(api.baz(x=5))) == 5
    assert api.outer.b.offset == 0


def test_typedef_chain_to_the_same_record_is_no_clash(api):
    assert api.bar is api.foo
    assert api.foo_a(ctypes.byref(api.foo(a=9))) == 9


def test_incomplete_enum_and_function_typedef_declaration(api):
    assert ctypes.sizeof(api.with_enum_ptr) == 24
    assert api.twice(21) == 42


def test_string_macros_concatenate_through_other_macros(api):
    assert api.DEV_PATH == "/dev/dri/card%d"
    assert api.DEV_PATH_PREFIX == "x:/dev/dri/card%d"


def test_string_macros_pass_to_const_char_parameters(api):
    assert api.str_len(api.DEV_PATH) == len("/dev/dri/card%d")  # str: encoded as UTF-8
    assert api.str_len(b"abc") == 3
    assert api.str_len("é") == 2
    assert api.str_len(None) == -1


def test_function_alias_macros_bind_the_function(api, capi):
    assert api.scale is api.scale_v2 and api.scale(21) == 42
    assert api.scale_alias is api.scale_v2
    assert api.add is api.add_v3 and api.add(40, 2) == 42
    assert api.scale_pass is api.scale_v2 and api.scale_v2.__name__ == "scale_v2"
    # a macro that reorders its arguments is no alias: it is reported
    assert "add_swapped" in capi[0].report and not hasattr(api, "add_swapped")


def test_functions_show_their_signature_and_doc(api):
    assert api.sum_rows.argtypes[0]._type_ is ctypes.c_int32 * 3
    assert api.sum_ptrs.argtypes[0]._type_ is ctypes.POINTER(ctypes.c_int32)
    assert "Array parameters are pointers" in api.sum_arr.__doc__


def test_clang_builtin_headers_need_no_include_dirs(tmp_path):
    g, mod = generate_headers(tmp_path, ["builtin_headers.h"], name="builtins")
    assert ctypes.sizeof(mod.uses_builtins) == 24
    assert "clang-builtin:stddef.h" in g.report and "clang-builtin:stdbool.h" in g.report


def test_flexible_array_member_is_reachable(api):
    m = api.msg_new(4)  # C fills data[i] = 10 * i
    items = m.contents.flexible("data", m.contents.n)
    assert list(items) == [0, 10, 20, 30]
    items[3] = 5
    assert api.msg_sum(m) == 35
    api.msg_free(m)
    mine = api.msg.with_room("data", 3)
    mine.n = 3
    mine.flexible("data", 3)[:] = [1, 2, 39]
    assert api.msg_sum(ctypes.byref(mine)) == 42
    with pytest.raises(TypeError, match="not a flexible array member"):
        mine.flexible("n", 1)


def test_rename_patches_can_name_one_kind(capi, tmp_path):
    """`struct st` and `st()` share a name in C; a rename with `kind` renames only one of them,
    and a renamed function is still looked up by its C name."""
    lib = capi[0].module.libraries[0][1][0]
    _, mod = generate_headers(
        tmp_path,
        ["c_api.h"],
        name="c_api_renamed",
        libraries=[{"name": "capi", "candidates": [lib]}],
        patches=[
            {"rename": {"from": "struct_st", "to": "St", "kind": "record"}, "why": "test"},
            {"rename": {"from": "st", "to": "st_call", "kind": "function"}, "why": "test"},
        ],
    )
    assert not hasattr(mod, "struct_st") and not hasattr(mod, "st")
    assert mod.st_call(ctypes.byref(mod.St(x=4))) == 8


def test_float16_is_reported_not_a_crash(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (d / "half.h").write_text("struct h { _Float16 x; int y; };\nstruct ok { int a; };\n")
    g, mod = generate_headers(tmp_path, ["half.h"], name="half", source_dir=d)
    assert ctypes.sizeof(mod.ok) == 4 and not hasattr(mod, "h")
    assert "record h: half.h:1: field h.x: type '_Float16': no ctypes type matches it" in (
        g.report.replace("corpus:", "")
    )


def test_int128_fields_are_python_ints(api, capi):
    w = api.wide()
    api.wide_set(ctypes.byref(w))
    assert w.s == -(1 << 100) - 3 and w.u == (1 << 127) + 7
    w.s, w.u = (1 << 90) + 5, 2
    assert api.wide_low(ctypes.byref(w)) == 7  # C adds them: the low 64 bits are 5 + 2
    w.u = -1  # converted as C converts to unsigned __int128
    assert w.u == (1 << 128) - 1
    assert api.wide(s=-2).s == -2
    from bindgen_rt import c_int128, c_uint128

    assert c_int128(-5).value == -5 and int(c_uint128(-1)) == (1 << 128) - 1
    # by value, libffi has no 128-bit integer: reported, not emitted
    assert not hasattr(api, "wide_by_value")
    assert "function wide_by_value: __int128 by value" in capi[0].report


def test_pointers_to_const_bytes_take_bytes(api):
    assert api.sum_bytes(b"\x01\x02\xff", 3) == 258
    assert api.sum_u8(b"\x05\x06", 2) == 11
    assert api.sum_s8(b"\xff\x03", 2) == 2  # signed char: -1 + 3
    assert api.sum_cbyte(b"\x07", 1) == 7  # through a typedef of a const type
    assert api.sum_bytes(bytearray(b"\x01\x01"), 2) == 2
    assert api.first_byte(b"\x2a") == 42
    arr = (ctypes.c_uint8 * 2)(4, 5)  # what the pointer took before still works
    assert api.sum_bytes(arr, 2) == 9 and api.sum_bytes(None, 0) == 0
    assert api.sum_bytes.argtypes[0] is ctypes.POINTER(ctypes.c_uint8)  # the C signature


def test_pointers_to_writable_bytes_refuse_bytes(api):
    with pytest.raises(ctypes.ArgumentError):
        api.fill_bytes(b"\x00\x00", 2, 9)  # C would write into an immutable object
    buf = (ctypes.c_uint8 * 3)()
    api.fill_bytes(buf, 3, 9)
    assert list(buf) == [9, 9, 9]



def test_record_pointer_parameters_and_results_are_made_on_first_call(capi, tmp_path):
    """A function's pointer to a record was ``POINTER(RECORD)`` made on import, for every such
    function of a module, called or not (a pointer type costs about as much as the record's
    class). Importing makes none now; the first call, or ``argtypes``/``restype``, makes them,
    and the function then checks and converts arguments as a ctypes function with those
    ``argtypes`` does."""
    import subprocess
    import sys

    path = tmp_path / "c_api_probe.py"
    path.write_text(capi[0].text)
    code = f"""
import ctypes, importlib.util
spec = importlib.util.spec_from_file_location("c_api_probe", {str(path)!r})
api = importlib.util.module_from_spec(spec)
spec.loader.exec_module(api)
assert not {{api.msg, api.struct_st}} & set(ctypes._pointer_type_cache), "made on import"
m = api.msg_new(3)  # its result is a POINTER(msg)
assert type(m) is ctypes.POINTER(api.msg) and api.msg_new.restype is type(m)
assert api.msg_sum(m) == 30 and api.msg_sum.argtypes[0] is ctypes.POINTER(api.msg)
api.msg_free(m)
assert api.struct_st not in ctypes._pointer_type_cache  # st() not called yet
assert api.st(ctypes.byref(api.struct_st(x=21))) == 42
try:
    api.st(ctypes.byref(api.msg()))  # a record of another type: refused, as ctypes does
except ctypes.ArgumentError:
    print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
