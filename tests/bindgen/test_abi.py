"""Records by value through generated function bindings, against a gcc -O2 library.

Floating-point members must travel in SSE registers and integer ones in general registers (libffi
classifies by the ctypes field types), so a byte-blob record or a wrong field type shows up here as
a
wrong number (tinygrad's sum_d2 gives 3.0 instead of 3.75: bindgen_peers.md §5).
"""

from __future__ import annotations

import ctypes

import pytest

from .conftest import CORPUS, compile_c, generate_headers, requires_gcc

pytestmark = [requires_gcc]

IMPL = r"""
#include <stdarg.h>
#include "abi_byvalue.h"
double sum_d2(struct d2 s) { return s.x + s.y; }
unsigned sum_i3(struct i3 s) { return s.a + s.b + s.c; }
double sum_mix(struct mix s) { return s.f + s.i + s.d; }
struct d2 make_d2(double x, double y) { struct d2 r = {x, y}; return r; }
int sum_bf(struct bf s) { return (int)s.a * 1000000 + (int)s.b * 1000 + s.c; }
struct bf make_bf(unsigned a, unsigned b, int c) { struct bf r; r.a = a; r.b = b; r.c = c; return r;
}
double sum_bfd(struct bfd s) { return s.lo * 100.0 + s.hi + s.d; }
struct bfd make_bfd(unsigned lo, int hi, double d) { struct bfd r; r.lo = lo; r.hi = hi; r.d = d;
return r; }
double sum_d2a(struct d2a s) { return s.x * 10 + s.y; }
long long sum_big(struct big s) { long long t = 0; for (int i = 0; i < 5; i++) t = t * 10 + s.v[i];
return t; }
struct big make_big(long long first) { struct big r; for (int i = 0; i < 5; i++) r.v[i] = first + i;
return r; }
struct mix make_mix(float f, int i, double d) { struct mix r = {f, i, d}; return r; }
float sum_fl2(struct fl2 s) { return s.a * 2 + s.b; }
struct fl2 make_fl2(float a, float b) { struct fl2 r = {a, b}; return r; }
double sum_many(struct d2 a, struct i3 b, struct mix c, int n, struct d2 *out) {
	out->x = a.x + c.d; out->y = b.a + b.b + b.c + n;
	return a.x + a.y + b.a + b.b + b.c + c.f + c.i + c.d + n;
}
int probe_counter = 41;
struct d2 probe_origin = {-1.5, 2.5};
int bump(void) { return ++probe_counter; }
int count_args(int n, ...) { va_list ap; va_start(ap, n); int t = 0; for (int i = 0; i < n; i++) t
+= va_arg(ap, int); va_end(ap); return t; }
"""


@pytest.fixture(scope="module")
def abi(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("abi")
    lib = compile_c(IMPL, tmp / "lib" / "libprobe.so", [CORPUS], shared=True, opt="-O2")
    g, mod = generate_headers(
        tmp,
        ["abi_byvalue.h"],
        name="abi_probe",
        libraries=[{"name": "probe", "candidates": [str(lib)]}],
        keep={"files": ["corpus:abi_byvalue.h"]},
    )
    return mod


def test_sum_d2_sse_pair(abi):
    assert abi.sum_d2(abi.d2(1.5, 2.25)) == 3.75


def test_sum_i3_integer_class(abi):
    assert abi.sum_i3(abi.i3(1, 2, 3)) == 6


def test_sum_mix_float_int_double(abi):
    assert abi.sum_mix(abi.mix(f=1.5, i=2, d=3.0)) == 6.5


def test_make_d2_returned_by_value(abi):
    r = abi.make_d2(7.0, 8.0)
    assert isinstance(r, abi.d2)
    assert (r.x, r.y) == (7.0, 8.0)


def test_make_mix_returned_by_value(abi):
    r = abi.make_mix(0.5, -3, 1e300)
    assert (r.f, r.i, r.d) == (0.5, -3, 1e300)


def test_float_pair_in_one_sse_register(abi):
    assert abi.sum_fl2(abi.fl2(1.5, 0.25)) == 3.25
    r = abi.make_fl2(2.5, -1.0)
    assert (r.a, r.b) == (2.5, -1.0)


def test_bitfield_record_by_value(abi):
    assert abi.sum_bf(abi.bf(a=5, b=300, c=-7)) == 5 * 1000000 + 300 * 1000 - 7
    r = abi.make_bf(6, 511, -(1 << 19))
    assert (r.a, r.b, r.c) == (6, 511, -(1 << 19))


def test_bitfields_next_to_a_double_by_value(abi):
    assert abi.sum_bfd(abi.bfd(lo=3, hi=-20, d=0.5)) == 300 - 20 + 0.5
    r = abi.make_bfd(15, -2048, 2.25)
    assert (r.lo, r.hi, r.d) == (15, -2048, 2.25)


def test_aligned16_record_by_value(abi):
    assert ctypes.alignment(abi.d2a) == 16 and ctypes.sizeof(abi.d2a) == 16
    assert abi.sum_d2a(abi.d2a(x=1.0, y=2.5)) == 12.5


def test_memory_class_record_by_value(abi):
    big = abi.big()
    for i, v in enumerate((1, 2, 3, 4, 5)):
        big.v[i] = v
    assert abi.sum_big(big) == 12345
    r = abi.make_big(40)
    assert list(r.v) == [40, 41, 42, 43, 44]


def test_several_records_and_an_out_pointer(abi):
    out = abi.d2()
    total = abi.sum_many(
        abi.d2(1.0, 2.0), abi.i3(3, 4, 5), abi.mix(0.5, 6, 7.0), 8, ctypes.byref(out)
    )
    assert total == 1 + 2 + 3 + 4 + 5 + 0.5 + 6 + 7 + 8
    assert (out.x, out.y) == (8.0, 20.0)


def test_variadic_function(abi):
    assert abi.count_args(3, ctypes.c_int(1), ctypes.c_int(2), ctypes.c_int(39)) == 42


def test_global_variables(abi):
    counter = abi.probe_counter()
    assert counter.value == 41
    assert abi.bump() == 42 and counter.value == 42
    counter.value = 99
    assert abi.bump() == 100
    origin = abi.probe_origin()
    assert isinstance(origin, abi.d2) and (origin.x, origin.y) == (-1.5, 2.5)


def test_signatures_are_typed(abi):
    """Arguments are checked by ctypes, so passing a wrong record is an error, not garbage."""
    with pytest.raises(ctypes.ArgumentError):
        abi.sum_d2(abi.i3(1, 2, 3))


def test_missing_library_is_reported_on_first_call(tmp_path):
    _, mod = generate_headers(
        tmp_path,
        ["abi_byvalue.h"],
        name="abi_missing",
        libraries=[{"name": "probe", "candidates": [str(tmp_path / "nope" / "libprobe.so")]}],
    )
    with pytest.raises(OSError, match=r"library probe could not be loaded.*BINDGEN_LIB_PROBE"):
        mod.sum_d2(mod.d2(1.0, 2.0))
