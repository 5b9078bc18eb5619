/* The log cleaner's map-pass key scan in C: replication.cleaner._map_sequential, natively.
 *
 * map_sequential(data, pos, end, count, base, keys, nulls) does exactly what the Python
 * function of that name does, which stays the reference (and the fallback where this module is
 * not built): the same updates of ``keys`` and ``nulls``, in the same order, and the same
 * CorruptRecordError, with the same message, for the same input. That includes the Python
 * code's own rules: reads are bounded by the buffer (not by ``end``), the timestamp and
 * offset deltas are skipped without a length bound,
 * and a key is a slice (clipped at the buffer's end like one). Its only differences: it takes
 * any contiguous buffer and makes bytes keys from it, and it refuses a negative ``pos`` or
 * ``end`` with ValueError (no caller passes one; Python would index from the buffer's end).
 *
 * Every byte is read through a bounds check against the buffer's length, so corrupt input
 * raises CorruptRecordError and never reads outside the buffer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* replication.errors.CorruptRecordError, looked up when the module is imported. */
static PyObject *CorruptRecordError;

/* What the Python code raises when an index runs past the buffer (its IndexError). */
static void
past_end(void)
{
    PyErr_SetString(CorruptRecordError, "record runs past the end of its batch");
}

/* A zigzag varint as cleaner._varint reads it: at most 10 bytes of 7 bits, so up to 70 bits,
 * more than an int64 holds. ``value`` is the decoded value when ``big`` is 0; when ``big`` is 1
 * its magnitude is 2**63 or more and ``value`` is only its sign (1 or -1), with the raw
 * (still zigzag-encoded) bits kept in ``lo`` (bits 0 to 63) and ``hi`` (bits 64 to 69) for an
 * error message that needs the exact number. */
typedef struct {
    int64_t value;
    int big;
    uint64_t lo;
    unsigned hi;
} Varint;

/* Reads the varint at buf[pos]; returns the position after it, or -1 with CorruptRecordError
 * set: past 10 bytes (checked before each byte, as the Python code does) or past the buffer. */
static Py_ssize_t
read_varint(const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos, Varint *v)
{
    uint64_t lo = 0;
    unsigned hi = 0;
    for (Py_ssize_t i = pos;; i++) {
        Py_ssize_t n = i - pos; /* bytes read so far */
        if (n >= 10) {
            PyErr_Format(CorruptRecordError, "varint at %zd runs past 10 bytes", pos);
            return -1;
        }
        if (i >= len) {
            past_end();
            return -1;
        }
        uint64_t bits = buf[i] & 0x7F;
        if (n < 9) {
            lo |= bits << (7 * n);
        }
        else { /* the 10th byte: bits 63 to 69 */
            lo |= bits << 63;
            hi = (unsigned)(bits >> 1);
        }
        if (buf[i] < 0x80) {
            v->lo = lo;
            v->hi = hi;
            v->big = hi != 0;
            if (v->big) {
                v->value = (lo & 1) ? -1 : 1;
            }
            else { /* zigzag: (z >> 1) ^ -(z & 1), which fits an int64 for a 64-bit z */
                v->value = (lo & 1) ? -(int64_t)(lo >> 1) - 1 : (int64_t)(lo >> 1);
            }
            return i + 1;
        }
    }
}

/* The exact value of a big varint as a Python int: m = z >> 1, then ~m if z is odd. */
static PyObject *
big_varint_value(const Varint *v)
{
    PyObject *high = NULL, *shifted = NULL, *low = NULL, *m = NULL, *result = NULL;
    PyObject *sixty_three = PyLong_FromLong(63);
    if (sixty_three == NULL)
        return NULL;
    high = PyLong_FromUnsignedLong(v->hi);
    low = PyLong_FromUnsignedLongLong(v->lo >> 1);
    if (high != NULL && low != NULL)
        shifted = PyNumber_Lshift(high, sixty_three);
    if (shifted != NULL)
        m = PyNumber_Or(shifted, low);
    if (m != NULL)
        result = (v->lo & 1) ? PyNumber_Invert(m) : Py_NewRef(m);
    Py_DECREF(sixty_three);
    Py_XDECREF(high);
    Py_XDECREF(shifted);
    Py_XDECREF(low);
    Py_XDECREF(m);
    return result;
}

/* "record of length N runs past its batch", N exact even when it does not fit an int64. */
static void
bad_length(const Varint *v)
{
    if (!v->big) {
        PyErr_Format(CorruptRecordError, "record of length %lld runs past its batch",
                     (long long)v->value);
        return;
    }
    PyObject *value = big_varint_value(v);
    if (value != NULL) {
        PyErr_Format(CorruptRecordError, "record of length %S runs past its batch", value);
        Py_DECREF(value);
    }
}

/* base + i as a Python int; Python's ints do not wrap past the int64 range, so neither may
 * this (i >= 0). */
static PyObject *
offset_value(long long base, long long i)
{
    if (base <= LLONG_MAX - i)
        return PyLong_FromLongLong(base + i);
    PyObject *b = PyLong_FromLongLong(base), *d = PyLong_FromLongLong(i), *sum = NULL;
    if (b != NULL && d != NULL)
        sum = PyNumber_Add(b, d);
    Py_XDECREF(b);
    Py_XDECREF(d);
    return sum;
}

/* Skips a varint whose value is not needed (a timestamp or offset delta) as the Python code
 * does: continuation bytes with no length bound, each bounds-checked. Returns the position
 * after it, or -1 with CorruptRecordError set. */
/* A zigzag varint at buf[pos] into *v, a one-byte one (the common case) decoded inline; the
 * position after it, or -1 with CorruptRecordError set. */
static inline Py_ssize_t
read_signed(const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos, Varint *v)
{
    if (pos >= len) {
        past_end();
        return -1;
    }
    if (buf[pos] < 0x80) {
        v->value = (buf[pos] & 1) ? -(int64_t)(buf[pos] >> 1) - 1 : (int64_t)(buf[pos] >> 1);
        v->big = 0;
        return pos + 1;
    }
    return read_varint(buf, len, pos, v);
}

static Py_ssize_t
skip_varint(const unsigned char *buf, Py_ssize_t len, Py_ssize_t p)
{
    for (;; p++) {
        if (p >= len) {
            past_end();
            return -1;
        }
        if (buf[p] < 0x80)
            return p + 1;
    }
}

/* The scan itself over a buffer of ``len`` bytes; 0, or -1 with an exception set. */
static int
scan(const unsigned char *buf, Py_ssize_t len, Py_ssize_t pos, Py_ssize_t end,
     long long count, long long base, PyObject *keys, PyObject *nulls)
{
    for (long long i = 0; i < count; i++) {
        Varint v;
        Py_ssize_t p;

        /* the record's length (zigzag: an odd byte is a negative length, refused below) */
        if ((p = read_signed(buf, len, pos, &v)) < 0)
            return -1;
        /* length < 1 or p + length > end (end - p cannot overflow: 0 <= p <= len, 0 <= end) */
        if (v.value < 1 || v.big || v.value > (int64_t)end - (int64_t)p) {
            bad_length(&v);
            return -1;
        }
        Py_ssize_t rec_end = p + (Py_ssize_t)v.value;

        p += 1; /* attributes */
        if ((p = skip_varint(buf, len, p)) < 0) /* timestamp delta */
            return -1;
        if ((p = skip_varint(buf, len, p)) < 0) /* offset delta */
            return -1;

        /* the key's length: negative for a null key, which is not mapped */
        if ((p = read_signed(buf, len, p, &v)) < 0)
            return -1;
        if (v.value >= 0) {
            if (v.big || v.value >= (int64_t)rec_end - (int64_t)p) {
                PyErr_SetString(CorruptRecordError,
                                "record key runs past the end of its record");
                return -1;
            }
            Py_ssize_t key_len = (Py_ssize_t)v.value;
            /* keys[data[p : p + key_len]] = offset (a slice stops at the buffer's end) */
            PyObject *key = PyBytes_FromStringAndSize(
                (const char *)buf + p, key_len <= len - p ? key_len : len - p);
            if (key == NULL)
                return -1;
            PyObject *offset = offset_value(base, i);
            if (offset == NULL) {
                Py_DECREF(key);
                return -1;
            }
            int failed = PyDict_SetItem(keys, key, offset);
            Py_DECREF(key);
            /* a value length of -1 (zigzag 1) right after the key: a tombstone */
            if (!failed && p + key_len >= len) {
                past_end();
                failed = -1;
            }
            if (!failed && buf[p + key_len] == 1)
                failed = PyList_Append(nulls, offset);
            Py_DECREF(offset);
            if (failed)
                return -1;
        }
        pos = rec_end;
    }
    if (pos != end) {
        PyErr_Format(CorruptRecordError,
                     "batch declares %lld records but %zd bytes are left over", count,
                     end - pos);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(map_sequential_doc,
"map_sequential(data, pos, end, count, base, keys, nulls)\n--\n\n"
"replication.cleaner._map_sequential in C (see there): map the keys of the records section\n"
"data[pos:end] of a batch whose offset deltas are 0, 1, 2..., keys[key] = offset, and each\n"
"tombstone's offset to nulls. ``data`` is any contiguous bytes-like object (the keys are\n"
"bytes), ``keys`` a dict, ``nulls`` a list, ``pos`` and ``end`` >= 0 and ``base`` an int64.\n"
"Raises CorruptRecordError as the Python function does.");

static PyObject *
map_sequential(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t pos, end;
    long long count, base;
    PyObject *keys, *nulls;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnLLO!O!:map_sequential", &data, &pos, &end, &count, &base,
                          &PyDict_Type, &keys, &PyList_Type, &nulls))
        return NULL;
    int rc;
    if (pos < 0 || end < 0) {
        PyErr_SetString(PyExc_ValueError, "map_sequential: pos and end must be >= 0");
        rc = -1;
    }
    else {
        rc = scan((const unsigned char *)data.buf, data.len, pos, end, count, base, keys,
                  nulls);
    }
    PyBuffer_Release(&data);
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"map_sequential", map_sequential, METH_VARARGS, map_sequential_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "replication._cleaner_native",
    .m_doc = "The log cleaner's hot loop in C (optional: replication.cleaner falls back to "
             "its Python code).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__cleaner_native(void)
{
    PyObject *errors = PyImport_ImportModule("replication.errors");
    if (errors == NULL)
        return NULL;
    CorruptRecordError = PyObject_GetAttrString(errors, "CorruptRecordError");
    Py_DECREF(errors);
    if (CorruptRecordError == NULL)
        return NULL;
    return PyModule_Create(&module);
}
