/* The NVIDIA launch hot path in C: the same stores as the Python launch that
 * runtime/drivers/nv/launcher.py generates, without the interpreter's per-statement cost.
 *
 * make(config) returns a function launch(args) -> bool. It checks the argument types against the
 * specialization, packs the arguments into the next launch slot's parameter area, writes the
 * QMD's release payload and the segment's progress sequence (and the acquire payload when the
 * previous timeline value did not come from this channel), writes the GPFIFO entry and GP_PUT,
 * fences, rings the doorbell, then updates the Python-side bookkeeping. It returns False, having
 * stored nothing, when an argument does not fit, the slot or the GPFIFO ring is busy, or a value
 * outgrows 32 bits: the caller then makes room or takes the careful path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

enum { K_BUF = 0, K_I8, K_I16, K_I32, K_I64, K_F32, K_F64 };
#define MAX_SLOTS 64
#define MAX_ARGS 64
#define M32 0xFFFFFFFFull

typedef struct {
    Py_buffer chunk, state, tl, ring, userd, bell;
    int have[6];
    uint8_t *base;          /* the slot chunk's backing buffer */
    uint64_t *st;           /* slot values [0, n), current slot at [n] */
    volatile uint64_t *tlv; /* the timeline value */
    uint64_t *ringp;
    uint32_t *userdp;
    uint8_t *bellp;
    Py_ssize_t n, nargs, pbase, pay, gp_put_dw, bell_width;
    uint64_t mask, token;
    Py_ssize_t block_off[MAX_SLOTS], acq_idx[MAX_SLOTS], seq_idx[MAX_SLOTS];
    uint64_t ent_a[MAX_SLOTS], ent_c[MAX_SLOTS];
    int kind[MAX_ARGS];
    Py_ssize_t off[MAX_ARGS];
    PyObject *dev, *ch, *append, *buffer_type;
    PyObject *dd, *cd;  /* the device's and the channel's instance dicts (plain attributes) */
    PyObject *bell_fn, *token_obj, *note;   /* a doorbell that is a Python call (the mock GPU) */
} launcher;

static PyObject *s_timeline_value, *s_chain_value, *s_seq, *s_gp_put, *s_gp_free_until,
    *s_pb_put, *s_freed, *s_base, *s_va, *s_check_live, *s_fault, *s_closed, *s_device;

static void launcher_free(PyObject *capsule) {
    launcher *L = (launcher *)PyCapsule_GetPointer(capsule, "nvlaunch");
    if (!L) return;
    Py_buffer *bufs[6] = {&L->chunk, &L->state, &L->tl, &L->ring, &L->userd, &L->bell};
    for (int i = 0; i < 6; i++)
        if (L->have[i]) PyBuffer_Release(bufs[i]);
    Py_XDECREF(L->dev);
    Py_XDECREF(L->ch);
    Py_XDECREF(L->append);
    Py_XDECREF(L->buffer_type);
    Py_XDECREF(L->dd);
    Py_XDECREF(L->cd);
    Py_XDECREF(L->bell_fn);
    Py_XDECREF(L->token_obj);
    Py_XDECREF(L->note);
    PyMem_Free(L);
}

static inline void store_fence(void) {
#if defined(__x86_64__) || defined(__i386__)
    /* write-combined stores (BAR memory) become visible before the doorbell store */
    __asm__ __volatile__("sfence" ::: "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("dsb st" ::: "memory");
#else
    __sync_synchronize();
#endif
}

/* A plain instance attribute, read from the instance dict (borrowed reference). */
static PyObject *field(PyObject *dict, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (!v && !PyErr_Occurred()) PyErr_SetObject(PyExc_AttributeError, key);
    return v;
}

/* o.attr's truth: 1, 0, or -1 on error */
static int attr_true(PyObject *o, PyObject *attr) {
    PyObject *v = PyObject_GetAttr(o, attr);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

static PyObject *launch(PyObject *self, PyObject *args) {
    launcher *L = (launcher *)PyCapsule_GetPointer(self, "nvlaunch");
    if (!L) return NULL;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != L->nargs) Py_RETURN_FALSE;
    union { uint64_t u; int64_t i; double d; float f; } val[MAX_ARGS];
    for (Py_ssize_t a = 0; a < L->nargs; a++) {
        PyObject *o = PyTuple_GET_ITEM(args, a);
        int k = L->kind[a];
        if (k == K_BUF) {
            if ((PyObject *)Py_TYPE(o) != L->buffer_type) Py_RETURN_FALSE;
            PyObject *owner = PyObject_GetAttr(o, s_device);
            if (!owner) return NULL;
            Py_DECREF(owner);
            if (owner != L->dev) Py_RETURN_FALSE;  /* another device's buffer: the careful path */
            int dead = attr_true(o, s_freed);
            if (dead < 0) return NULL;
            if (!dead) {
                PyObject *b = PyObject_GetAttr(o, s_base);
                if (!b) return NULL;
                if (b != Py_None) dead = attr_true(b, s_freed);
                Py_DECREF(b);
                if (dead < 0) return NULL;
            }
            if (dead) {  /* raises the buffer's own error */
                PyObject *r = PyObject_CallMethodNoArgs(o, s_check_live);
                if (!r) return NULL;
                Py_DECREF(r);
            }
            PyObject *va = PyObject_GetAttr(o, s_va);
            if (!va) return NULL;
            val[a].u = PyLong_AsUnsignedLongLong(va);
            Py_DECREF(va);
            if (val[a].u == (uint64_t)-1 && PyErr_Occurred()) return NULL;
        } else if (k <= K_I64) {
            if (!PyLong_CheckExact(o)) Py_RETURN_FALSE;
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
            if (overflow) Py_RETURN_FALSE;
            if (x == -1 && PyErr_Occurred()) return NULL;
            long long lim = k == K_I8 ? 0x7F : k == K_I16 ? 0x7FFF : k == K_I32 ? 0x7FFFFFFF
                                                                          : 0x7FFFFFFFFFFFFFFFLL;
            if (x > lim || x < -lim - 1) Py_RETURN_FALSE;  /* the careful path decides */
            val[a].i = x;
        } else {
            if (!PyFloat_CheckExact(o)) Py_RETURN_FALSE;
            double d = PyFloat_AS_DOUBLE(o);
            if (k == K_F32) {
                if (isfinite(d) && fabs(d) > FLT_MAX) Py_RETURN_FALSE;
                val[a].f = (float)d;
            } else {
                val[a].d = d;
            }
        }
    }
    PyObject *fault = field(L->dd, s_fault);
    if (!fault) return NULL;
    if (fault != Py_None) Py_RETURN_FALSE;  /* the short path raises the device's error */
    PyObject *closed = field(L->dd, s_closed);
    if (!closed) return NULL;
    if (closed != Py_False) Py_RETURN_FALSE;
    PyObject *tv = field(L->dd, s_timeline_value), *sq = field(L->cd, s_seq);
    if (!tv || !sq) return NULL;
    uint64_t v = PyLong_AsUnsignedLongLong(tv) + 1;
    uint64_t seq = PyLong_AsUnsignedLongLong(sq) + 1;
    if (PyErr_Occurred()) return NULL;
    if (v > M32 || seq > M32) Py_RETURN_FALSE;
    Py_ssize_t i = (Py_ssize_t)L->st[L->n];
    if (L->st[i] > *L->tlv) Py_RETURN_FALSE;  /* the slot's previous launch is still running */
    PyObject *gp = field(L->cd, s_gp_put), *fu = field(L->cd, s_gp_free_until);
    PyObject *cv = field(L->dd, s_chain_value), *pb = field(L->cd, s_pb_put);
    if (!gp || !fu || !cv || !pb) return NULL;
    long long put = PyLong_AsLongLong(gp);
    long long free_until = PyLong_AsLongLong(fu);
    long long chain = PyLong_AsLongLong(cv);
    if (PyErr_Occurred()) return NULL;
    if (put >= free_until) Py_RETURN_FALSE;
    /* everything the bookkeeping needs is made before the GPU sees anything: the timeline value
     * and the in-flight record (seq, pb_put, put), whose items are also the new attribute values */
    PyObject *result = NULL, *rec = NULL, *v_obj = PyLong_FromUnsignedLongLong(v);
    {
        PyObject *seq_obj = PyLong_FromUnsignedLongLong(seq);
        PyObject *put_obj = PyLong_FromLongLong(put + 1);
        if (v_obj && seq_obj && put_obj) rec = PyTuple_Pack(3, seq_obj, pb, put_obj);
        Py_XDECREF(seq_obj);
        Py_XDECREF(put_obj);
    }
    if (!rec) goto out;
    /* -- the stores the GPU reads */
    uint8_t *blk = L->base + L->block_off[i];
    for (Py_ssize_t a = 0; a < L->nargs; a++) {
        uint8_t *p = blk + L->pbase + L->off[a];
        switch (L->kind[a]) {
        case K_BUF: case K_I64: memcpy(p, &val[a].u, 8); break;
        case K_I32: { int32_t x = (int32_t)val[a].i; memcpy(p, &x, 4); break; }
        case K_I16: { int16_t x = (int16_t)val[a].i; memcpy(p, &x, 2); break; }
        case K_I8: { int8_t x = (int8_t)val[a].i; memcpy(p, &x, 1); break; }
        case K_F32: memcpy(p, &val[a].f, 4); break;
        case K_F64: memcpy(p, &val[a].d, 8); break;
        }
    }
    uint32_t *words = (uint32_t *)L->base;
    *(volatile uint32_t *)(blk + L->pay) = (uint32_t)v;
    ((volatile uint32_t *)words)[L->seq_idx[i]] = (uint32_t)seq;
    if (chain >= 0 && (uint64_t)chain == v - 1) {
        ((volatile uint64_t *)L->ringp)[put & L->mask] = L->ent_c[i];
    } else {
        ((volatile uint32_t *)words)[L->acq_idx[i]] = (uint32_t)(v - 1);
        ((volatile uint64_t *)L->ringp)[put & L->mask] = L->ent_a[i];
    }
    ((volatile uint32_t *)L->userdp)[L->gp_put_dw] = (uint32_t)((put + 1) & L->mask);
    store_fence();
    if (L->bell_fn) {
        PyObject *r = PyObject_CallOneArg(L->bell_fn, L->token_obj);
        if (!r) {  /* a fault noticed while submitting poisons the device, as in Python */
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyErr_NormalizeException(&et, &ev, &tb);
            Py_XDECREF(PyObject_CallOneArg(L->note, ev ? ev : Py_None));
            PyErr_Restore(et, ev, tb);
            goto out;
        }
        Py_DECREF(r);
    } else if (L->bell_width == 8) {
        *(volatile uint64_t *)L->bellp = L->token;
    } else {
        *(volatile uint32_t *)L->bellp = (uint32_t)L->token;
    }
    /* -- bookkeeping */
    L->st[i] = v;
    L->st[L->n] = (uint64_t)((i + 1) % L->n);
    if (PyDict_SetItem(L->dd, s_timeline_value, v_obj) < 0 ||
        PyDict_SetItem(L->dd, s_chain_value, v_obj) < 0 ||
        PyDict_SetItem(L->cd, s_seq, PyTuple_GET_ITEM(rec, 0)) < 0 ||
        PyDict_SetItem(L->cd, s_gp_put, PyTuple_GET_ITEM(rec, 2)) < 0)
        goto out;
    PyObject *r = PyObject_CallOneArg(L->append, rec);
    if (!r) goto out;
    Py_DECREF(r);
    result = Py_NewRef(Py_True);
out:
    Py_XDECREF(v_obj);
    Py_XDECREF(rec);
    return result;
}

static PyMethodDef launch_def = {"launch", launch, METH_O,
                                 "launch(args) -> bool: one launch through the next slot"};

static int get_ints(PyObject *seq, Py_ssize_t n, Py_ssize_t *out, uint64_t *out_u) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_SetString(PyExc_ValueError, "per-slot tuple of the wrong length");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyTuple_GET_ITEM(seq, i);
        if (out) out[i] = PyLong_AsSsize_t(o);
        else out_u[i] = PyLong_AsUnsignedLongLong(o);
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

static int get_view(PyObject *o, Py_buffer *b, int *have, Py_ssize_t need, void **ptr) {
    if (PyObject_GetBuffer(o, b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    *have = 1;
    if (b->len < need) {
        PyErr_SetString(PyExc_ValueError, "memory view too small");
        return -1;
    }
    *ptr = b->buf;
    return 0;
}

static PyObject *make(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *chunk, *state, *tl, *ring, *userd, *bell, *offs, *acq, *seqs, *ea, *ec, *kinds,
        *poffs, *dev, *ch, *append, *btype, *note, *dd, *cd;
    Py_ssize_t n, pbase, pay, gp_put_dw, bell_index, bell_width;
    unsigned long long mask, token;
    if (!PyArg_ParseTuple(args, "OOOOOOnKnnnKnnOOOOOOOOOOOOO!O!", &chunk, &state, &tl, &ring,
                          &userd, &bell, &n, &mask, &pbase, &pay, &gp_put_dw, &token, &bell_index,
                          &bell_width, &offs, &acq, &seqs, &ea, &ec, &kinds, &poffs, &dev, &ch,
                          &append, &btype, &note, &PyDict_Type, &dd, &PyDict_Type, &cd))
        return NULL;
    if (n < 1 || n > MAX_SLOTS || (n & (n - 1)) || (bell_width != 4 && bell_width != 8)) {
        PyErr_SetString(PyExc_ValueError, "bad slot count or doorbell width");
        return NULL;
    }
    launcher *L = (launcher *)PyMem_Calloc(1, sizeof(launcher));
    if (!L) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(L, "nvlaunch", launcher_free);
    if (!cap) {
        PyMem_Free(L);
        return NULL;
    }
    L->n = n;
    L->mask = mask;
    L->pbase = pbase;
    L->pay = pay;
    L->gp_put_dw = gp_put_dw;
    L->token = token;
    L->bell_width = bell_width;
    void *p;
    if (get_view(chunk, &L->chunk, &L->have[0], 0, &p) < 0) goto fail;
    L->base = p;
    if (get_view(state, &L->state, &L->have[1], (n + 1) * 8, &p) < 0) goto fail;
    L->st = p;
    if (get_view(tl, &L->tl, &L->have[2], 8, &p) < 0) goto fail;
    L->tlv = p;
    if (get_view(ring, &L->ring, &L->have[3], (Py_ssize_t)(mask + 1) * 8, &p) < 0) goto fail;
    L->ringp = p;
    if (get_view(userd, &L->userd, &L->have[4], (gp_put_dw + 1) * 4, &p) < 0) goto fail;
    L->userdp = p;
    if (PyCallable_Check(bell)) {  /* a doorbell that is a Python call */
        L->bell_fn = Py_NewRef(bell);
        if (!(L->token_obj = PyLong_FromUnsignedLongLong(token))) goto fail;
    } else {
        if (get_view(bell, &L->bell, &L->have[5], (bell_index + 1) * bell_width, &p) < 0)
            goto fail;
        L->bellp = (uint8_t *)p + bell_index * bell_width;
    }
    if (get_ints(offs, n, L->block_off, NULL) < 0 || get_ints(acq, n, L->acq_idx, NULL) < 0 ||
        get_ints(seqs, n, L->seq_idx, NULL) < 0 || get_ints(ea, n, NULL, L->ent_a) < 0 ||
        get_ints(ec, n, NULL, L->ent_c) < 0)
        goto fail;
    if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) > MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "too many arguments");
        goto fail;
    }
    L->nargs = PyTuple_GET_SIZE(kinds);
    Py_ssize_t tmp[MAX_ARGS];
    if (get_ints(kinds, L->nargs, tmp, NULL) < 0 || get_ints(poffs, L->nargs, L->off, NULL) < 0)
        goto fail;
    for (Py_ssize_t a = 0; a < L->nargs; a++) {
        if (tmp[a] < K_BUF || tmp[a] > K_F64) {
            PyErr_SetString(PyExc_ValueError, "unknown argument kind");
            goto fail;
        }
        L->kind[a] = (int)tmp[a];
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (L->block_off[i] < 0 || L->block_off[i] + pay + 4 > L->chunk.len ||
            L->acq_idx[i] < 0 || (L->acq_idx[i] + 1) * 4 > L->chunk.len ||
            L->seq_idx[i] < 0 || (L->seq_idx[i] + 1) * 4 > L->chunk.len) {
            PyErr_SetString(PyExc_ValueError, "slot outside the chunk");
            goto fail;
        }
        for (Py_ssize_t a = 0; a < L->nargs; a++)
            if (L->block_off[i] + pbase + L->off[a] + 8 > L->chunk.len) {
                PyErr_SetString(PyExc_ValueError, "argument outside the chunk");
                goto fail;
            }
    }
    L->dev = Py_NewRef(dev);
    L->ch = Py_NewRef(ch);
    L->append = Py_NewRef(append);
    L->buffer_type = Py_NewRef(btype);
    L->note = Py_NewRef(note);
    L->dd = Py_NewRef(dd);
    L->cd = Py_NewRef(cd);
    PyObject *fn = PyCFunction_New(&launch_def, cap);
    Py_DECREF(cap);
    return fn;
fail:
    Py_DECREF(cap);
    return NULL;
}

static PyMethodDef methods[] = {
    {"make", make, METH_VARARGS, "make(...) -> launch function (see launcher.py)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_nvlaunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nvlaunch(void) {
#define INTERN(var, s) if (!(var = PyUnicode_InternFromString(s))) return NULL
    INTERN(s_timeline_value, "timeline_value");
    INTERN(s_chain_value, "_chain_value");
    INTERN(s_seq, "seq");
    INTERN(s_gp_put, "gp_put");
    INTERN(s_gp_free_until, "_gp_free_until");
    INTERN(s_pb_put, "pb_put");
    INTERN(s_freed, "freed");
    INTERN(s_base, "base");
    INTERN(s_va, "va");
    INTERN(s_check_live, "_check_live");
    INTERN(s_fault, "_fault");
    INTERN(s_closed, "closed");
    INTERN(s_device, "device");
    return PyModule_Create(&moddef);
}
