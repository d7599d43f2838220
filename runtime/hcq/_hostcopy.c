/* Host memory copies for staging buffers: stream_copy(dst, src) copies src into dst (same length)
 * with non-temporal stores on x86-64, so the destination does not displace the cache and holds
 * no dirty lines that the copy engine's reads would have to snoop; elsewhere it is memcpy. The
 * GIL is released during the copy, so several threads can copy parts of one buffer. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

static void stream(uint8_t *d, const uint8_t *s, size_t n) {
#if defined(__x86_64__)
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
        _mm_stream_si128((__m128i *)(d + i), a);
        _mm_stream_si128((__m128i *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(d + i + 48), e);
    }
    memcpy(d + i, s + i, n - i);
    _mm_sfence();  /* the streamed stores are globally visible before the copy is submitted */
#else
    memcpy(d, s, n);
#endif
}

static PyObject *stream_copy(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *dst, *src;
    if (!PyArg_ParseTuple(args, "OO", &dst, &src)) return NULL;
    Py_buffer d, s;
    if (PyObject_GetBuffer(dst, &d, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(src, &s, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&d);
        return NULL;
    }
    if (d.len != s.len) {
        PyBuffer_Release(&d);
        PyBuffer_Release(&s);
        return PyErr_Format(PyExc_ValueError, "stream_copy: %zd bytes into %zd", s.len, d.len);
    }
    Py_BEGIN_ALLOW_THREADS
    stream((uint8_t *)d.buf, (const uint8_t *)s.buf, (size_t)d.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&d);
    PyBuffer_Release(&s);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"stream_copy", stream_copy, METH_VARARGS, "stream_copy(dst, src): see the file comment"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_hostcopy", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__hostcopy(void) { return PyModule_Create(&moddef); }
