/* A leader's walk over every record of a client's batch, in C: replication.validation._walk,
 * natively.
 *
 * walk_records(data, pos, end, count, compacted) gives the verdict the Python function of that
 * name gives, which stays the reference (and the fallback where this module is not built):
 * None when data[pos:end] holds exactly ``count`` well-formed v2 records with the offset deltas
 * 0, 1, 2..., else a str saying what is wrong (the str "a record without a key" when
 * ``compacted`` and a record has none). Every read is bounded by ``end``, which may not pass
 * the buffer's length (ValueError), so hostile input never reads outside the buffer; the walk
 * allocates nothing but its answer.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define RUNS_PAST (-1)
#define TOO_LONG (-2)

/* The zigzag varint of at most ``most`` bytes at buf[*p], not reaching ``end``: 0 with *out
 * and *p set, or RUNS_PAST / TOO_LONG. */
static inline int
varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *p, int most, int64_t *out)
{
    uint64_t z = 0;
    Py_ssize_t i = *p;
    for (int n = 0; n < most; n++, i++) {
        if (i >= end)
            return RUNS_PAST;
        unsigned char b = buf[i];
        if (n < 10)
            z |= (uint64_t)(b & 0x7F) << (7 * n);
        if (b < 0x80) {
            *out = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
            *p = i + 1;
            return 0;
        }
    }
    return TOO_LONG;
}

static PyObject *
walk(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, long long count, int compacted)
{
    static const char *fields[2] = {"key", "value"};
    long long index = 0;
    int64_t v;
    int rc, most = 5;

    for (; index < count; index++) {
        if (pos >= end)
            return PyUnicode_FromFormat("it declares %lld records but holds %lld", count, index);
        Py_ssize_t p = pos;
        if ((rc = varint(buf, end, &p, most = 5, &v)) < 0)
            goto bad_varint;
        int64_t length = v;
        if (length < 1 || length > (int64_t)(end - p))
            return PyUnicode_FromFormat("record %lld has length %lld, %zd bytes left in its "
                                        "batch", index, (long long)length, end - p);
        Py_ssize_t rec_end = p + (Py_ssize_t)length;
        p += 1; /* attributes */
        if ((rc = varint(buf, rec_end, &p, most = 10, &v)) < 0) /* timestamp delta */
            goto bad_varint;
        if ((rc = varint(buf, rec_end, &p, most = 5, &v)) < 0) /* offset delta */
            goto bad_varint;
        if (v != index)
            return PyUnicode_FromFormat("record %lld has offset delta %lld (Invalid offset)",
                                        index, (long long)v);
        for (int f = 0; f < 2; f++) {
            if ((rc = varint(buf, rec_end, &p, most = 5, &v)) < 0)
                goto bad_varint;
            if (v >= 0) {
                if (v > (int64_t)(rec_end - p))
                    return PyUnicode_FromFormat("record %lld: its %s runs past the end of the "
                                                "record", index, fields[f]);
                p += (Py_ssize_t)v;
            }
            else if (v != -1)
                return PyUnicode_FromFormat("record %lld: %s length %lld", index, fields[f],
                                            (long long)v);
            else if (compacted && f == 0)
                return PyUnicode_FromString("a record without a key");
        }
        if ((rc = varint(buf, rec_end, &p, most = 5, &v)) < 0) /* header count */
            goto bad_varint;
        if (v < 0)
            return PyUnicode_FromFormat("record %lld: header count %lld", index, (long long)v);
        for (int64_t h = v; h > 0; h--) {
            if ((rc = varint(buf, rec_end, &p, most = 5, &v)) < 0)
                goto bad_varint;
            if (v < 0 || v > (int64_t)(rec_end - p))
                return PyUnicode_FromFormat("record %lld: a header key of length %lld", index,
                                            (long long)v);
            p += (Py_ssize_t)v;
            if ((rc = varint(buf, rec_end, &p, most = 5, &v)) < 0)
                goto bad_varint;
            if (v >= 0) {
                if (v > (int64_t)(rec_end - p))
                    return PyUnicode_FromFormat("record %lld: a header value runs past the end "
                                                "of the record", index);
                p += (Py_ssize_t)v;
            }
            else if (v != -1)
                return PyUnicode_FromFormat("record %lld: a header value length %lld", index,
                                            (long long)v);
        }
        if (p != rec_end)
            return PyUnicode_FromFormat("record %lld declares %lld bytes but its fields take "
                                        "%lld", index, (long long)length,
                                        (long long)(p - rec_end + length));
        pos = rec_end;
    }
    if (pos != end)
        return PyUnicode_FromFormat("%zd bytes after its %lld records", end - pos, count);
    Py_RETURN_NONE;

bad_varint:
    if (rc == RUNS_PAST)
        return PyUnicode_FromFormat("record %lld: a varint runs past the end of its record",
                                    index);
    return PyUnicode_FromFormat("record %lld: a varint longer than %d bytes", index, most);
}

PyDoc_STRVAR(walk_records_doc,
"walk_records(data, pos, end, count, compacted)\n--\n\n"
"replication.validation._walk in C (see there): None when the records section data[pos:end]\n"
"is ``count`` well-formed records with the offset deltas 0, 1, 2..., else what is wrong.\n"
"``data`` is any contiguous bytes-like object; 0 <= pos and end <= len(data) (ValueError).");

static PyObject *
walk_records(PyObject *self, PyObject *args)
{
    Py_buffer data;
    Py_ssize_t pos, end;
    long long count;
    int compacted;

    (void)self;
    if (!PyArg_ParseTuple(args, "y*nnLp:walk_records", &data, &pos, &end, &count, &compacted))
        return NULL;
    PyObject *result;
    if (pos < 0 || end > data.len) {
        PyErr_SetString(PyExc_ValueError, "walk_records: pos must be >= 0 and end at most "
                                          "the buffer's length");
        result = NULL;
    }
    else {
        result = walk((const unsigned char *)data.buf, pos, end, count, compacted);
    }
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"walk_records", walk_records, METH_VARARGS, walk_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "replication._records_native",
    .m_doc = "A leader's record validation walk in C (optional: replication.validation falls "
             "back to its Python code).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__records_native(void)
{
    return PyModule_Create(&module);
}
