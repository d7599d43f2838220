/* The NVIDIA launch hot path in C: an accelerator of the launch that runtime/drivers/nv/launcher.py
 * describes (its module docstring, steps 1-5) and executes in Python (`ShapeLauncher._python`):
 * one launch through the next slot of a shape's launcher, with the submission protocol of the
 * channel (runtime/drivers/nv/gpfifo.py `Channel.publish`), without the interpreter's
 * per-statement cost. It decides nothing of its own: where it writes is the launcher's
 * `SlotLayout` (make()'s settings of the same names), what it writes is fixed by the commands the
 * launcher built, and tests/runtime/test_nv_launch_paths.py checks that both executors leave the
 * same bytes in the same places.
 *
 * State is shared through explicit structures, never through Python attributes: the channel's
 * words (`channel_state`, gpfifo.CHANNEL_WORDS), the device's words (`device_state`,
 * gpfifo.DEVICE_WORDS), the channel's in-flight records and the launcher's slot words are
 * buffers both sides read and write. Their field order is exported (CHANNEL_WORDS, DEVICE_WORDS,
 * ABI) and the Python side refuses a module whose order differs from its own.
 *
 * make(**config) returns a function launch(args) -> bool. It checks the argument types against
 * the specialization, packs the arguments into the next slot's parameter area, writes the QMD's
 * release payload and the segment's progress sequence (and the acquire payload when the previous
 * timeline value was not released by this channel's last launch), then publishes like
 * Channel.publish: GPFIFO entry, in-flight record, state words, GP_PUT, store fence, doorbell.
 * It returns False, having stored nothing, when an argument does not fit or is a freed buffer,
 * the device may not submit, the slot or the GPFIFO ring is busy, or a value outgrows 32 bits:
 * the caller then makes room or takes the careful path (which raises the right error).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

#ifndef HCQ_SOURCE_SHA256
#define HCQ_SOURCE_SHA256 ""  /* setup.py defines it when it builds the wheel's copy */
#endif
#define ABI 8

/* gpfifo.CHANNEL_WORDS, in order */
typedef struct {
    uint64_t seq, gp_put, gp_free_until, pb_put, pb_free_until, reclaimed, chain_value;
} channel_state;
/* gpfifo.DEVICE_WORDS, in order */
typedef struct {
    uint64_t timeline_value, blocked;
} device_state;
#define CHANNEL_WORDS "seq", "gp_put", "gp_free_until", "pb_put", "pb_free_until", "reclaimed", \
    "chain_value"
#define DEVICE_WORDS "timeline_value", "blocked"
/* the bit of `blocked` that SubmitLock.HELD sets while a thread holds the submission lock */
#define LOCK_HELD 2

/* launcher._NATIVE_KINDS: signed integers (Python ints, numpy signed), floats, numpy unsigned */
enum { K_BUF = 0, K_I8, K_I16, K_I32, K_I64, K_F32, K_F64, K_U8, K_U16, K_U32, K_U64 };
#define MAX_SLOTS 64
#define MAX_ARGS 64
#define M32 0xFFFFFFFFull
enum { V_CHUNK, V_SLOTS, V_DEV, V_CH, V_TL, N_VIEWS };

/* What Channel.publish writes to, and the doorbell: the part of a channel both the launch and
 * the replay submit through (`publish`). */
enum { P_REC, P_RING, P_USERD, P_BELL, N_PVIEWS };
typedef struct {
    Py_buffer view[N_PVIEWS];
    int have[N_PVIEWS];
    uint64_t *rec;              /* in-flight records: 2 words per submission, by seq % entries */
    volatile uint64_t *ring;
    uint32_t *userd;
    uint8_t *bell;
    Py_ssize_t gp_put_dw, bell_width;
    uint64_t mask, token;
    PyObject *bell_fn, *token_obj;  /* a doorbell that is a Python call (the mock) */
    PyObject *on_error;             /* told of an error the doorbell raised */
} channel_io;

typedef struct {
    Py_buffer view[N_VIEWS];
    int have[N_VIEWS];
    uint8_t *base;              /* the slot chunk's backing buffer */
    uint64_t *st;               /* slot values [0, n), current slot at [n] */
    device_state *dev;
    channel_state *ch;
    channel_io io;
    volatile uint64_t *tlv;     /* the timeline signal's value */
    Py_ssize_t n, nargs;
    /* SlotLayout: byte offset of each slot's parameters, dword indices of its payloads */
    Py_ssize_t param_off[MAX_SLOTS], payload_idx[MAX_SLOTS], acq_idx[MAX_SLOTS],
        seq_idx[MAX_SLOTS];
    uint64_t ent_a[MAX_SLOTS], ent_c[MAX_SLOTS];
    int kind[MAX_ARGS];
    Py_ssize_t off[MAX_ARGS];
    PyObject *buffer_type, *owner;  /* Buffer, and the device whose buffers the launch takes */
    PyObject *types;  /* the exact type of each argument this launch is specialized for */
} launcher;

static PyObject *s_freed, *s_base, *s_va, *s_device;

/* A writable, contiguous view of `o` of at least `need` bytes, kept in *view (*have set) */
static int take_view(Py_buffer *view, int *have, PyObject *o, Py_ssize_t need, const char *what,
                     void **ptr) {
    if (PyObject_GetBuffer(o, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    *have = 1;
    if (view->len < need) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, %zd needed", what, view->len, need);
        return -1;
    }
    *ptr = view->buf;
    return 0;
}

static int io_init(channel_io *P, PyObject *rec, PyObject *ring, PyObject *userd, PyObject *bell,
                   unsigned long long entries, Py_ssize_t gp_put_dw, unsigned long long token,
                   Py_ssize_t bell_index, Py_ssize_t bell_width, PyObject *on_error) {
    if (!entries || (entries & (entries - 1)) || (bell_width != 4 && bell_width != 8) ||
        gp_put_dw < 0 || bell_index < 0) {
        PyErr_SetString(PyExc_ValueError, "bad GPFIFO size, GP_PUT position or doorbell");
        return -1;
    }
    if (!PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "on_error must be a callable");
        return -1;
    }
    P->mask = entries - 1;
    P->gp_put_dw = gp_put_dw;
    P->token = token;
    P->bell_width = bell_width;
    P->on_error = Py_NewRef(on_error);
    void *p;
    if (take_view(&P->view[P_REC], &P->have[P_REC], rec, (Py_ssize_t)entries * 16, "records",
                  &p) < 0)
        return -1;
    P->rec = p;
    if (take_view(&P->view[P_RING], &P->have[P_RING], ring, (Py_ssize_t)entries * 8, "ring",
                  &p) < 0)
        return -1;
    P->ring = p;
    if (take_view(&P->view[P_USERD], &P->have[P_USERD], userd, (gp_put_dw + 1) * 4, "userd",
                  &p) < 0)
        return -1;
    P->userd = p;
    if (PyCallable_Check(bell)) {  /* a doorbell that is a Python call */
        P->bell_fn = Py_NewRef(bell);
        if (!(P->token_obj = PyLong_FromUnsignedLongLong(token))) return -1;
    } else {
        if (take_view(&P->view[P_BELL], &P->have[P_BELL], bell, (bell_index + 1) * bell_width,
                      "doorbell", &p) < 0)
            return -1;
        P->bell = (uint8_t *)p + bell_index * bell_width;
    }
    return 0;
}

static void io_release(channel_io *P) {
    for (int i = 0; i < N_PVIEWS; i++)
        if (P->have[i]) PyBuffer_Release(&P->view[i]);
    Py_XDECREF(P->bell_fn);
    Py_XDECREF(P->token_obj);
    Py_XDECREF(P->on_error);
}

static void launcher_free(PyObject *capsule) {
    launcher *L = (launcher *)PyCapsule_GetPointer(capsule, "nvlaunch");
    if (!L) return;
    for (int i = 0; i < N_VIEWS; i++)
        if (L->have[i]) PyBuffer_Release(&L->view[i]);
    io_release(&L->io);
    Py_XDECREF(L->buffer_type);
    Py_XDECREF(L->types);
    Py_XDECREF(L->owner);
    PyMem_Free(L);
}

/* The fencing rule of gpfifo._Fence, the same on both sides: one store fence between the last
 * store the GPU reads and the doorbell store (those stores go to write-combined BAR memory, which
 * may be buffered past the doorbell store; a store fence drains and orders them). */
static inline void store_fence(void) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("sfence" ::: "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("dsb st" ::: "memory");
#else
    __sync_synchronize();
#endif
}

/* Channel.publish: the last GPFIFO entry at `put`, the in-flight record of `seq`, the state
 * words, USERD's GP_PUT, the store fence, the doorbell. 0, or -1 with the doorbell's error set
 * (a fault noticed while submitting poisons the device, as in Python: `on_error` is told). */
static int publish(channel_io *P, channel_state *C, uint64_t seq, uint64_t put, uint64_t entry) {
    P->ring[put & P->mask] = entry;
    put += 1;
    uint64_t r = 2 * (seq & P->mask);
    P->rec[r] = C->pb_put;
    P->rec[r + 1] = put;
    C->seq = seq;
    C->gp_put = put;
    ((volatile uint32_t *)P->userd)[P->gp_put_dw] = (uint32_t)(put & P->mask);
    store_fence();
    if (P->bell_fn) {
        PyObject *res = PyObject_CallOneArg(P->bell_fn, P->token_obj);
        if (!res) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyErr_NormalizeException(&et, &ev, &tb);
            Py_XDECREF(PyObject_CallOneArg(P->on_error, ev ? ev : Py_None));
            PyErr_Restore(et, ev, tb);
            return -1;
        }
        Py_DECREF(res);
    } else if (P->bell_width == 8) {
        *(volatile uint64_t *)P->bell = P->token;
    } else {
        *(volatile uint32_t *)P->bell = (uint32_t)P->token;
    }
    return 0;
}

/* o.attr's truth: 1, 0, or -1 on error */
static int attr_true(PyObject *o, PyObject *attr) {
    PyObject *v = PyObject_GetAttr(o, attr);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* 1 when buffer `o` (or the buffer it slices) was freed, 0 if live, -1 on error */
static int buffer_dead(PyObject *o) {
    int dead = attr_true(o, s_freed);
    if (dead) return dead;
    PyObject *b = PyObject_GetAttr(o, s_base);
    if (!b) return -1;
    if (b != Py_None) dead = attr_true(b, s_freed);
    Py_DECREF(b);
    return dead;
}

static PyObject *launch(PyObject *self, PyObject *args) {
    launcher *L = (launcher *)PyCapsule_GetPointer(self, "nvlaunch");
    if (!L) return NULL;
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != L->nargs) Py_RETURN_FALSE;
    /* 1. arguments */
    union { uint64_t u; int64_t i; double d; float f; } val[MAX_ARGS];
    for (Py_ssize_t a = 0; a < L->nargs; a++) {
        PyObject *o = PyTuple_GET_ITEM(args, a);
        /* arguments of other types belong to another specialization, as in the Python launch:
         * this one's kinds would take some of them (an int where a numpy integer was) */
        if ((PyObject *)Py_TYPE(o) != PyTuple_GET_ITEM(L->types, a)) Py_RETURN_FALSE;
        int k = L->kind[a];
        if (k == K_BUF) {
            if ((PyObject *)Py_TYPE(o) != L->buffer_type) Py_RETURN_FALSE;
            PyObject *dev = PyObject_GetAttr(o, s_device);
            if (!dev) return NULL;
            Py_DECREF(dev);  /* compared by identity only */
            if (dev != L->owner) Py_RETURN_FALSE;  /* another device's: the careful path refuses */
            int dead = buffer_dead(o);
            if (dead < 0) return NULL;
            if (dead) Py_RETURN_FALSE;  /* the careful path raises the buffer's error */
            PyObject *va = PyObject_GetAttr(o, s_va);
            if (!va) return NULL;
            val[a].u = PyLong_AsUnsignedLongLong(va);
            Py_DECREF(va);
            if (val[a].u == (uint64_t)-1 && PyErr_Occurred()) return NULL;
        } else if (k >= K_U8) {
            /* numpy unsigned integers (their __index__): the range of struct's B/H/I/Q */
            if (PyFloat_Check(o) || !PyIndex_Check(o)) Py_RETURN_FALSE;
            PyObject *ix = PyNumber_Index(o);
            if (!ix) return NULL;
            unsigned long long x = PyLong_AsUnsignedLongLong(ix);
            Py_DECREF(ix);
            if (x == (unsigned long long)-1 && PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
                PyErr_Clear();
                Py_RETURN_FALSE;  /* negative or too large: the careful path decides */
            }
            unsigned long long lim = k == K_U8 ? 0xFFull : k == K_U16 ? 0xFFFFull
                                     : k == K_U32 ? 0xFFFFFFFFull : ~0ull;
            if (x > lim) Py_RETURN_FALSE;
            val[a].u = x;
        } else if (k <= K_I64) {
            /* Python ints, and numpy integers (through __index__, which the call below uses) */
            if (!PyLong_CheckExact(o) && (PyFloat_Check(o) || !PyIndex_Check(o))) Py_RETURN_FALSE;
            int overflow = 0;
            long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
            if (overflow) Py_RETURN_FALSE;
            if (x == -1 && PyErr_Occurred()) return NULL;
            long long lim = k == K_I8 ? 0x7F : k == K_I16 ? 0x7FFF : k == K_I32 ? 0x7FFFFFFF
                                                                          : 0x7FFFFFFFFFFFFFFFLL;
            if (x > lim || x < -lim - 1) Py_RETURN_FALSE;  /* the careful path decides */
            val[a].i = x;
        } else {
            double d;
            if (PyFloat_CheckExact(o)) {
                d = PyFloat_AS_DOUBLE(o);
            } else {  /* numpy floats: through __float__; ints go to the careful path */
                if (PyLong_Check(o) || !Py_TYPE(o)->tp_as_number ||
                    !Py_TYPE(o)->tp_as_number->nb_float)
                    Py_RETURN_FALSE;
                d = PyFloat_AsDouble(o);
                if (d == -1.0 && PyErr_Occurred()) return NULL;
            }
            if (k == K_F32) {
                /* struct's "f" (PyFloat_Pack4): a finite double that rounds to infinity does not
                 * fit (the careful path names the argument); one that rounds to FLT_MAX does */
                float f = (float)d;
                if (isinf(f) && !isinf(d)) Py_RETURN_FALSE;
                val[a].f = f;
            } else {
                val[a].d = d;
            }
        }
    }
    /* 2. admission */
    device_state *D = L->dev;
    channel_state *C = L->ch;
    if (D->blocked) Py_RETURN_FALSE;  /* the short path raises the device's error */
    uint64_t v = D->timeline_value + 1, seq = C->seq + 1;
    if (v > M32 || seq > M32) Py_RETURN_FALSE;
    Py_ssize_t i = (Py_ssize_t)L->st[L->n];
    if (L->st[i] > *L->tlv) Py_RETURN_FALSE;  /* the slot's previous launch is still running */
    uint64_t put = C->gp_put;
    if (put >= C->gp_free_until) Py_RETURN_FALSE;
    /* 3. the slot's stores, and the dependency */
    uint8_t *params = L->base + L->param_off[i];
    for (Py_ssize_t a = 0; a < L->nargs; a++) {
        uint8_t *p = params + L->off[a];
        switch (L->kind[a]) {
        case K_BUF: case K_I64: memcpy(p, &val[a].u, 8); break;
        case K_I32: { int32_t x = (int32_t)val[a].i; memcpy(p, &x, 4); break; }
        case K_I16: { int16_t x = (int16_t)val[a].i; memcpy(p, &x, 2); break; }
        case K_I8: { int8_t x = (int8_t)val[a].i; memcpy(p, &x, 1); break; }
        case K_U64: memcpy(p, &val[a].u, 8); break;
        case K_U32: { uint32_t x = (uint32_t)val[a].u; memcpy(p, &x, 4); break; }
        case K_U16: { uint16_t x = (uint16_t)val[a].u; memcpy(p, &x, 2); break; }
        case K_U8: { uint8_t x = (uint8_t)val[a].u; memcpy(p, &x, 1); break; }
        case K_F32: memcpy(p, &val[a].f, 4); break;
        case K_F64: memcpy(p, &val[a].d, 8); break;
        }
    }
    volatile uint32_t *words = (volatile uint32_t *)L->base;
    words[L->payload_idx[i]] = (uint32_t)v;
    words[L->seq_idx[i]] = (uint32_t)seq;
    uint64_t entry;
    if (C->chain_value == v - 1) {
        entry = L->ent_c[i];
    } else {
        words[L->acq_idx[i]] = (uint32_t)(v - 1);
        entry = L->ent_a[i];
    }
    /* 4. the books */
    C->chain_value = v;
    D->timeline_value = v;
    L->st[i] = v;
    L->st[L->n] = (uint64_t)((i + 1) % L->n);
    /* 5. publish */
    if (publish(&L->io, C, seq, put, entry) < 0) return NULL;
    Py_RETURN_TRUE;
}

static PyMethodDef launch_def = {"launch", launch, METH_O,
                                 "launch(args) -> bool: one launch through the next slot"};

/* ------------------------------------------------------------------ replay of a laid-out stream */
enum { R_WORDS, R_SPANS, R_PB, R_DEV, R_CH, R_PROGRESS, R_LAST, R_TL, N_RVIEWS };
#define MAX_PATCHES 8
#define MAX_CALLS 16
#define TRAILER_DW 6

typedef struct {
    Py_buffer view[N_RVIEWS];
    int have[N_RVIEWS];
    uint32_t *words;            /* the queue's words (patched in place, as `update` does) */
    uint64_t *spans;            /* (ext, a, cnt) per GPFIFO entry, Channel.submit_spans' form */
    uint32_t *pb;
    device_state *dev;
    channel_state *ch;
    channel_io io;
    volatile uint64_t *progress;
    uint64_t *last;             /* where the submitted timeline value is noted (the graph's) */
    volatile uint64_t *tlv;     /* the timeline signal's value */
    Py_ssize_t head_dw;         /* the words of the wait that opens the stream (0: none) */
    int64_t head_add;           /* it waits for the value + head_add */
    Py_ssize_t k, nspans, pb_dw, npatch, ncalls;
    uint64_t pb_entry_base, len_shift;
    uint64_t limit;             /* the largest timeline value it submits (larger: declined) */
    uint32_t trailer[TRAILER_DW];
    Py_ssize_t seq_dw;          /* the trailer's payload position */
    Py_ssize_t p_lo[MAX_PATCHES], p_hi[MAX_PATCHES];
    int64_t p_add[MAX_PATCHES];
    int p_bits[MAX_PATCHES];
    PyObject *bodies[MAX_CALLS];
    uint64_t body_va[MAX_CALLS];
    PyObject *vals, *var;       /* the queue's bindings: vals[var] = value, as `update` does */
} replayer;

static PyObject *s_bound_va;
static int get_ints(PyObject *seq, Py_ssize_t n, Py_ssize_t *out, uint64_t *out_u,
                    const char *what);

static void replayer_free(PyObject *capsule) {
    replayer *R = (replayer *)PyCapsule_GetPointer(capsule, "nvreplay");
    if (!R) return;
    for (int i = 0; i < N_RVIEWS; i++)
        if (R->have[i]) PyBuffer_Release(&R->view[i]);
    for (Py_ssize_t i = 0; i < R->ncalls; i++) Py_XDECREF(R->bodies[i]);
    io_release(&R->io);
    Py_XDECREF(R->vals);
    Py_XDECREF(R->var);
    PyMem_Free(R);
}

/* Channel.reclaim: takes back the space of the submissions the progress word shows consumed */
static void reclaim(replayer *R) {
    channel_state *C = R->ch;
    uint64_t done = *R->progress;
    if (done > C->seq) done = C->seq;
    if (done <= C->reclaimed) return;
    uint64_t pb_tail, gp_tail;
    if (done == C->seq) {
        pb_tail = C->pb_put;
        gp_tail = C->gp_put;
    } else {
        uint64_t r = 2 * (done & R->io.mask);
        pb_tail = R->io.rec[r];
        gp_tail = R->io.rec[r + 1];
    }
    C->pb_free_until = pb_tail + (uint64_t)R->pb_dw;
    C->gp_free_until = gp_tail + R->io.mask;
    C->reclaimed = done;
}

/* replay(live, held=False): `held` says the caller holds the device's submission lock (whose
 * bit in `blocked` then stands for itself, not for another thread inside a submission): a graph
 * of several segments submits them all under one holding of the lock. */
static PyObject *replay(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    replayer *R = (replayer *)PyCapsule_GetPointer(self, "nvreplay");
    if (!R) return NULL;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "replay(live, held=False) takes one or two arguments");
        return NULL;
    }
    PyObject *live = args[0];
    int held = 0;
    if (nargs == 2 && (held = PyObject_IsTrue(args[1])) < 0) return NULL;
    /* 1. admission: live buffers, the device, the bodies, the values */
    PyObject *fast = PySequence_Fast(live, "replay(live): a sequence of buffers is needed");
    if (!fast) return NULL;
    Py_ssize_t nl = PySequence_Fast_GET_SIZE(fast);
    for (Py_ssize_t i = 0; i < nl; i++) {
        int dead = buffer_dead(PySequence_Fast_GET_ITEM(fast, i));
        if (dead) {
            Py_DECREF(fast);
            if (dead < 0) return NULL;
            return PyLong_FromLong(0);  /* the Python route names the buffer */
        }
    }
    Py_DECREF(fast);
    device_state *D = R->dev;
    channel_state *C = R->ch;
    /* faulted, closed, or the lock is held (by another thread, unless `held`) */
    if (D->blocked & ~(uint64_t)(held ? LOCK_HELD : 0)) return PyLong_FromLong(0);
    for (Py_ssize_t i = 0; i < R->ncalls; i++) {
        PyObject *va = PyObject_GetAttr(R->bodies[i], s_bound_va);
        if (!va) return NULL;
        uint64_t u = va == Py_None ? 0 : PyLong_AsUnsignedLongLong(va);
        Py_DECREF(va);
        if (u == (uint64_t)-1 && PyErr_Occurred()) return NULL;
        if (u != R->body_va[i]) return PyLong_FromLong(0);
    }
    uint64_t v = D->timeline_value + 1, seq = C->seq + 1;
    if (v > R->limit) return PyLong_FromLong(0);
    for (Py_ssize_t p = 0; p < R->npatch; p++) {
        int64_t x = (int64_t)v + R->p_add[p];
        if (x < 0 || (R->p_bits[p] < 64 && ((uint64_t)x >> R->p_bits[p])))
            return PyLong_FromLong(0);
    }
    /* A timeline value the GPU has reached already needs no wait (NVQueue.resubmitter): the
     * opening wait's words, and an entry left with nothing, are left out. */
    Py_ssize_t skip = 0, first = 0;
    if (R->head_dw && *R->tlv >= (uint64_t)((int64_t)v + R->head_add)) {
        skip = R->head_dw;
        first = R->nspans > 1 && R->spans[1] + R->spans[2] <= (uint64_t)skip;
    }
    Py_ssize_t gp_n = R->nspans - first;
    /* 2. room: the block (skipping the ring's tail when it would wrap) and the entries */
    Py_ssize_t n = R->k - skip + TRAILER_DW;
    uint64_t start = C->pb_put, off = start % (uint64_t)R->pb_dw;
    if (off + (uint64_t)n > (uint64_t)R->pb_dw) {
        start += (uint64_t)R->pb_dw - off;
        off = 0;
    }
    if (start + (uint64_t)n > C->pb_free_until || C->gp_put + (uint64_t)gp_n > C->gp_free_until) {
        reclaim(R);
        if (start + (uint64_t)n > C->pb_free_until || C->gp_put + (uint64_t)gp_n > C->gp_free_until)
            return PyLong_FromLong(0);
    }
    PyObject *vo = PyLong_FromUnsignedLongLong(v);
    if (!vo) return NULL;
    if (PyDict_SetItem(R->vals, R->var, vo) < 0) {
        Py_DECREF(vo);
        return NULL;
    }
    /* 3. the patches, the block, the entries */
    for (Py_ssize_t p = 0; p < R->npatch; p++) {
        uint64_t x = (uint64_t)((int64_t)v + R->p_add[p]);
        R->words[R->p_lo[p]] = (uint32_t)x;
        if (R->p_hi[p] >= 0) R->words[R->p_hi[p]] = (uint32_t)(x >> 32);
    }
    uint32_t *dst = R->pb + off;
    memcpy(dst, R->words + skip, (size_t)(R->k - skip) * 4);
    R->trailer[R->seq_dw] = (uint32_t)seq;
    R->trailer[R->seq_dw + 1] = (uint32_t)(seq >> 32);
    memcpy(dst + R->k - skip, R->trailer, sizeof(R->trailer));
    C->pb_put = start + (uint64_t)n;
    /* words[a] lands at base + 4 * a */
    uint64_t base = R->pb_entry_base + off * 4 - (uint64_t)skip * 4;
    volatile uint64_t *ring = R->io.ring;
    uint64_t put = C->gp_put;
    for (Py_ssize_t s = first; s + 1 < R->nspans; s++) {
        const uint64_t *sp = R->spans + 3 * s;
        uint64_t a = sp[1], cnt = sp[2];
        if (!sp[0] && a < (uint64_t)skip) {  /* the first run, less the words left out */
            cnt -= (uint64_t)skip - a;
            a = (uint64_t)skip;
        }
        ring[put & R->io.mask] = sp[0] ? a : (base + 4 * a) | cnt << R->len_shift;
        put += 1;
    }
    const uint64_t *sp = R->spans + 3 * (R->nspans - 1);
    uint64_t a = sp[1], cnt = sp[2];
    if (a < (uint64_t)skip) {
        cnt -= (uint64_t)skip - a;
        a = (uint64_t)skip;
    }
    uint64_t entry = (base + 4 * a) | (cnt + TRAILER_DW) << R->len_shift;
    /* 4. the books */
    D->timeline_value = v;
    *R->last = v;
    /* 5. publish */
    if (publish(&R->io, C, seq, put, entry) < 0) {
        Py_DECREF(vo);
        return NULL;
    }
    return vo;
}

static PyMethodDef replay_def = {"replay", (PyCFunction)(void (*)(void))replay, METH_FASTCALL,
                                 "replay(live, held=False) -> int: one resubmission, 0 when "
                                 "declined"};

static int rget_view(replayer *R, int which, PyObject *o, Py_ssize_t need, const char *what,
                     void **ptr) {
    return take_view(&R->view[which], &R->have[which], o, need, what, ptr);
}

static PyObject *make_replay(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    static char *names[] = {"words", "spans", "calls", "patches", "vals", "var", "pushbuf",
                            "pb_entry_base", "length_shift", "trailer", "trailer_seq_dw",
                            "device_words", "channel_words", "records", "ring", "userd",
                            "doorbell", "progress", "last", "limit", "timeline", "head_dw",
                            "head_add", "entries", "gp_put_dw", "token",
                            "doorbell_index", "doorbell_width", "on_error", NULL};
    PyObject *words, *spans, *calls, *patches, *vals, *var, *pb, *trailer, *dw, *cw, *rec, *ring,
        *userd, *bell, *progress, *last, *tl, *on_error;
    long long head_add;
    unsigned long long pb_entry_base, len_shift, limit, entries, token;
    Py_ssize_t seq_dw, gp_put_dw, bell_index, bell_width, head_dw;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOOOOOKKOnOOOOOOOOKOnLKnKnnO", names,
                                     &words, &spans, &calls, &patches, &vals, &var, &pb,
                                     &pb_entry_base, &len_shift, &trailer, &seq_dw, &dw, &cw, &rec,
                                     &ring, &userd, &bell, &progress, &last, &limit, &tl, &head_dw,
                                     &head_add, &entries, &gp_put_dw, &token,
                                     &bell_index, &bell_width, &on_error))
        return NULL;
    if (PyTuple_GET_SIZE(args) || !kw || PyDict_GET_SIZE(kw) != 29) {
        PyErr_SetString(PyExc_TypeError, "make_replay() takes every setting, by keyword");
        return NULL;
    }
    if (len_shift >= 64 || seq_dw < 0 || seq_dw + 1 >= TRAILER_DW) {
        PyErr_SetString(PyExc_ValueError, "bad GPFIFO entry layout");
        return NULL;
    }
    if (!PyDict_Check(vals)) {
        PyErr_SetString(PyExc_TypeError, "vals must be a dict");
        return NULL;
    }
    replayer *R = (replayer *)PyMem_Calloc(1, sizeof(replayer));
    if (!R) return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(R, "nvreplay", replayer_free);
    if (!cap) {
        PyMem_Free(R);
        return NULL;
    }
    R->pb_entry_base = pb_entry_base;
    R->len_shift = len_shift;
    R->seq_dw = seq_dw;
    R->limit = limit;
    R->head_dw = head_dw;
    R->head_add = head_add;
    R->vals = Py_NewRef(vals);
    R->var = Py_NewRef(var);
    if (io_init(&R->io, rec, ring, userd, bell, entries, gp_put_dw, token, bell_index, bell_width,
                on_error) < 0)
        goto fail;
    void *p;
    if (rget_view(R, R_WORDS, words, 4, "words", &p) < 0) goto fail;
    R->words = p;
    R->k = R->view[R_WORDS].len / 4;
    if (rget_view(R, R_SPANS, spans, 24, "spans", &p) < 0) goto fail;
    R->spans = p;
    R->nspans = R->view[R_SPANS].len / 24;
    if (rget_view(R, R_PB, pb, 4, "pushbuf", &p) < 0) goto fail;
    R->pb = p;
    R->pb_dw = R->view[R_PB].len / 4;
    if (R->k + TRAILER_DW > R->pb_dw / 2) {
        PyErr_SetString(PyExc_ValueError, "the stream does not fit half the pushbuffer");
        goto fail;
    }
    if (rget_view(R, R_DEV, dw, sizeof(device_state), "device_words", &p) < 0) goto fail;
    R->dev = p;
    if (rget_view(R, R_CH, cw, sizeof(channel_state), "channel_words", &p) < 0) goto fail;
    R->ch = p;
    if (rget_view(R, R_PROGRESS, progress, 8, "progress", &p) < 0) goto fail;
    R->progress = p;
    if (rget_view(R, R_LAST, last, 8, "last", &p) < 0) goto fail;
    R->last = p;
    if (rget_view(R, R_TL, tl, 8, "timeline", &p) < 0) goto fail;
    R->tlv = p;
    Py_ssize_t tw[TRAILER_DW];
    if (get_ints(trailer, TRAILER_DW, tw, NULL, "trailer") < 0) goto fail;
    for (int i = 0; i < TRAILER_DW; i++) R->trailer[i] = (uint32_t)tw[i];
    /* the spans: every run lies inside the words; the last is a run ending with them */
    for (Py_ssize_t s = 0; s < R->nspans; s++) {
        const uint64_t *sp = R->spans + 3 * s;
        if (!sp[0] && sp[1] + sp[2] > (uint64_t)R->k) {
            PyErr_SetString(PyExc_ValueError, "spans: a run lies outside the words");
            goto fail;
        }
    }
    if (head_dw < 0 || head_dw > R->k || (head_dw && (R->spans[0] || R->spans[1] ||
                                                      R->spans[2] < (uint64_t)head_dw))) {
        PyErr_SetString(PyExc_ValueError, "head_dw: the opening wait must lie in the first run");
        goto fail;
    }
    if (!R->nspans || R->spans[3 * (R->nspans - 1)] ||
        R->spans[3 * (R->nspans - 1) + 1] + R->spans[3 * (R->nspans - 1) + 2] != (uint64_t)R->k) {
        PyErr_SetString(PyExc_ValueError, "spans: the last must be a run ending with the words");
        goto fail;
    }
    if (!PyTuple_Check(patches) || PyTuple_GET_SIZE(patches) > MAX_PATCHES ||
        !PyTuple_Check(calls) || PyTuple_GET_SIZE(calls) > MAX_CALLS) {
        PyErr_SetString(PyExc_ValueError, "patches (at most 8) and calls (at most 16): tuples");
        goto fail;
    }
    R->npatch = PyTuple_GET_SIZE(patches);
    for (Py_ssize_t i = 0; i < R->npatch; i++) {
        Py_ssize_t q[4];
        if (get_ints(PyTuple_GET_ITEM(patches, i), 4, q, NULL, "patch") < 0) goto fail;
        if (q[0] < 0 || q[0] >= R->k || q[1] >= R->k || q[3] < 1 || q[3] > 64) {
            PyErr_SetString(PyExc_ValueError, "a patch lies outside the words");
            goto fail;
        }
        R->p_lo[i] = q[0];
        R->p_hi[i] = q[1];
        R->p_add[i] = q[2];
        R->p_bits[i] = (int)q[3];
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(calls); i++) {
        PyObject *c = PyTuple_GET_ITEM(calls, i);
        if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 2) {
            PyErr_SetString(PyExc_ValueError, "calls: (body, its bound address) pairs");
            goto fail;
        }
        R->body_va[i] = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(c, 1));
        if (PyErr_Occurred()) goto fail;
        R->bodies[i] = Py_NewRef(PyTuple_GET_ITEM(c, 0));
        R->ncalls = i + 1;
    }
    PyObject *fn = PyCFunction_New(&replay_def, cap);
    Py_DECREF(cap);
    return fn;
fail:
    Py_DECREF(cap);
    return NULL;
}

static int get_ints(PyObject *seq, Py_ssize_t n, Py_ssize_t *out, uint64_t *out_u,
                    const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s: a tuple of %zd integers is needed", what, n);
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

static int get_view(launcher *L, int which, PyObject *o, Py_ssize_t need, const char *what,
                    void **ptr) {
    return take_view(&L->view[which], &L->have[which], o, need, what, ptr);
}

static PyObject *make(PyObject *mod, PyObject *args, PyObject *kw) {
    (void)mod;
    static char *names[] = {"chunk", "slots", "device_words", "channel_words", "records",
                            "timeline", "ring", "userd", "doorbell", "n_slots", "entries",
                            "gp_put_dw", "token", "doorbell_index", "doorbell_width",
                            "param_offs", "payload_idx", "acquire_idx", "seq_idx",
                            "entry_acquire", "entry_chained", "kinds", "arg_offs", "buffer_type",
                            "owner", "on_error", "types", NULL};
    PyObject *chunk, *slots, *dw, *cw, *rec, *tl, *ring, *userd, *bell, *pars, *pays, *acq, *seqs,
        *ea, *ec, *kinds, *poffs, *btype, *owner, *on_error, *types;
    Py_ssize_t n, gp_put_dw, bell_index, bell_width;
    unsigned long long entries, token;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOOOOOOOnKnKnnOOOOOOOOOOOO", names, &chunk,
                                     &slots, &dw, &cw, &rec, &tl, &ring, &userd, &bell, &n,
                                     &entries, &gp_put_dw, &token, &bell_index, &bell_width,
                                     &pars, &pays, &acq, &seqs, &ea, &ec, &kinds, &poffs,
                                     &btype, &owner, &on_error, &types))
        return NULL;
    if (PyTuple_GET_SIZE(args) || !kw || PyDict_GET_SIZE(kw) != 27) {
        PyErr_SetString(PyExc_TypeError, "make() takes every setting, by keyword");
        return NULL;
    }
    if (n < 1 || n > MAX_SLOTS || (n & (n - 1))) {
        PyErr_SetString(PyExc_ValueError, "bad slot count");
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
    if (io_init(&L->io, rec, ring, userd, bell, entries, gp_put_dw, token, bell_index, bell_width,
                on_error) < 0)
        goto fail;
    void *p;
    if (get_view(L, V_CHUNK, chunk, 0, "chunk", &p) < 0) goto fail;
    L->base = p;
    if (get_view(L, V_SLOTS, slots, (n + 1) * 8, "slots", &p) < 0) goto fail;
    L->st = p;
    if (get_view(L, V_DEV, dw, sizeof(device_state), "device_words", &p) < 0) goto fail;
    L->dev = p;
    if (get_view(L, V_CH, cw, sizeof(channel_state), "channel_words", &p) < 0) goto fail;
    L->ch = p;
    if (get_view(L, V_TL, tl, 8, "timeline", &p) < 0) goto fail;
    L->tlv = p;
    if (get_ints(pars, n, L->param_off, NULL, "param_offs") < 0 ||
        get_ints(pays, n, L->payload_idx, NULL, "payload_idx") < 0 ||
        get_ints(acq, n, L->acq_idx, NULL, "acquire_idx") < 0 ||
        get_ints(seqs, n, L->seq_idx, NULL, "seq_idx") < 0 ||
        get_ints(ea, n, NULL, L->ent_a, "entry_acquire") < 0 ||
        get_ints(ec, n, NULL, L->ent_c, "entry_chained") < 0)
        goto fail;
    if (!PyTuple_Check(kinds) || PyTuple_GET_SIZE(kinds) > MAX_ARGS) {
        PyErr_SetString(PyExc_ValueError, "kinds: a tuple of at most 64 argument kinds is needed");
        goto fail;
    }
    L->nargs = PyTuple_GET_SIZE(kinds);
    Py_ssize_t tmp[MAX_ARGS];
    if (get_ints(kinds, L->nargs, tmp, NULL, "kinds") < 0 ||
        get_ints(poffs, L->nargs, L->off, NULL, "arg_offs") < 0)
        goto fail;
    for (Py_ssize_t a = 0; a < L->nargs; a++) {
        if (tmp[a] < K_BUF || tmp[a] > K_U64) {
            PyErr_SetString(PyExc_ValueError, "kinds: unknown argument kind");
            goto fail;
        }
        L->kind[a] = (int)tmp[a];
    }
    Py_ssize_t len = L->view[V_CHUNK].len;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (L->param_off[i] < 0 || L->payload_idx[i] < 0 || (L->payload_idx[i] + 1) * 4 > len ||
            L->acq_idx[i] < 0 || (L->acq_idx[i] + 1) * 4 > len ||
            L->seq_idx[i] < 0 || (L->seq_idx[i] + 1) * 4 > len) {
            PyErr_SetString(PyExc_ValueError, "a slot lies outside the chunk");
            goto fail;
        }
        for (Py_ssize_t a = 0; a < L->nargs; a++)
            if (L->off[a] < 0 || L->param_off[i] + L->off[a] + 8 > len) {
                PyErr_SetString(PyExc_ValueError, "an argument lies outside the chunk");
                goto fail;
            }
    }
    if (!PyTuple_Check(types) || PyTuple_GET_SIZE(types) != L->nargs) {
        PyErr_SetString(PyExc_ValueError, "types: a tuple of one type per argument kind is needed");
        goto fail;
    }
    if (!PyType_Check(btype)) {
        PyErr_SetString(PyExc_TypeError, "buffer_type must be a type");
        goto fail;
    }
    L->buffer_type = Py_NewRef(btype);
    L->types = Py_NewRef(types);
    L->owner = Py_NewRef(owner);
    PyObject *fn = PyCFunction_New(&launch_def, cap);
    Py_DECREF(cap);
    return fn;
fail:
    Py_DECREF(cap);
    return NULL;
}

static PyMethodDef methods[] = {
    {"make", (PyCFunction)(void (*)(void))make, METH_VARARGS | METH_KEYWORDS,
     "make(**config) -> launch function (see launcher.py)"},
    {"make_replay", (PyCFunction)(void (*)(void))make_replay, METH_VARARGS | METH_KEYWORDS,
     "make_replay(**config) -> replay function (see queue.py NVQueue.native_resubmitter)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_nvlaunch", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nvlaunch(void) {
    if (!(s_freed = PyUnicode_InternFromString("freed")) ||
        !(s_base = PyUnicode_InternFromString("base")) ||
        !(s_va = PyUnicode_InternFromString("va")) ||
        !(s_device = PyUnicode_InternFromString("device")) ||
        !(s_bound_va = PyUnicode_InternFromString("bound_va")))
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    PyObject *cw = Py_BuildValue("(sssssss)", CHANNEL_WORDS);
    PyObject *dw = Py_BuildValue("(ss)", DEVICE_WORDS);
    if (!cw || !dw || PyModule_AddObject(m, "CHANNEL_WORDS", cw) < 0) {
        Py_XDECREF(cw);
        Py_XDECREF(dw);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddObject(m, "DEVICE_WORDS", dw) < 0 ||
        PyModule_AddIntConstant(m, "ABI", ABI) < 0 ||
        PyModule_AddIntConstant(m, "LOCK_HELD", LOCK_HELD) < 0 ||
        PyModule_AddStringConstant(m, "SOURCE_SHA256", HCQ_SOURCE_SHA256) < 0) {
        Py_XDECREF(dw);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
