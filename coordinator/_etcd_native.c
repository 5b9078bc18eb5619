/* An etcd Range response read in C: coordinator.etcd._range_into, natively.
 *
 * range_into(raw, index, out, stat_type) reads ``raw``, the serialized etcdserverpb
 * RangeResponse, and for each key-value whose key is in ``index`` (bytes -> position in
 * ``out``) sets out[position] = (value, stat_type(version - 1, create_revision, mod_revision,
 * lease)), stat_type being a tuple subclass of four fields (coordinator.model.Stat), made as
 * tuple.__new__ makes it. Returns the response's ``more``. The Python function of the same
 * name, which parses with protobuf, stays the reference and the fallback where this module is
 * not built, and does the same.
 *
 * The bytes come from the store over the network: every length is checked against what is
 * left of its message before it is used, a malformed message raises ValueError, and nothing
 * is read outside ``raw``. Keys not in ``index`` cost a bytes object each, freed at once.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A protobuf varint at buf[*p], before ``end``: 0 with *out and *p set, -1 if it runs past
 * ``end`` or over ten bytes. */
static inline int
varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *p, uint64_t *out)
{
    uint64_t v = 0;
    Py_ssize_t i = *p;
    for (int n = 0; n < 10; n++, i++) {
        if (i >= end)
            return -1;
        unsigned char b = buf[i];
        v |= (uint64_t)(b & 0x7F) << (7 * n);
        if (b < 0x80) {
            *out = v;
            *p = i + 1;
            return 0;
        }
    }
    return -1;
}

/* A field's tag at buf[*p], as protobuf takes one: a varint of at most five bytes, below
 * 2^32, of a field number from 1. 0 with *field and *wire set, or -1. */
static inline int
tag(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *p, unsigned *field, unsigned *wire)
{
    uint64_t v;
    Py_ssize_t at = *p;
    if (varint(buf, end, p, &v) < 0 || *p - at > 5 || v > 0xFFFFFFFFu || (v >> 3) == 0)
        return -1;
    *field = (unsigned)(v >> 3);
    *wire = (unsigned)(v & 7);
    return 0;
}

#define MAX_DEPTH 100 /* protobuf's own limit on nested messages and groups */

/* Skip a field of ``wire`` type whose tag (of ``field``) has been read, a group to its end
 * ``depth`` deep: 0, or -1 when it is malformed. */
static int
skip(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *p, unsigned field, unsigned wire,
     int depth)
{
    uint64_t v;
    switch (wire) {
    case 0:
        return varint(buf, end, p, &v);
    case 1:
        if (end - *p < 8)
            return -1;
        *p += 8;
        return 0;
    case 2:
        if (varint(buf, end, p, &v) < 0 || v > (uint64_t)(end - *p))
            return -1;
        *p += (Py_ssize_t)v;
        return 0;
    case 5:
        if (end - *p < 4)
            return -1;
        *p += 4;
        return 0;
    case 3: /* a group (none in etcd's messages, but protobuf skips one it does not know) */
        if (depth >= MAX_DEPTH)
            return -1;
        for (;;) {
            unsigned f, w;
            if (tag(buf, end, p, &f, &w) < 0)
                return -1;
            if (w == 4)
                return f == field ? 0 : -1;
            if (skip(buf, end, p, f, w, depth + 1) < 0)
                return -1;
        }
    default: /* an end of group without its start; 6 and 7 are not wire types */
        return -1;
    }
}

/* A message whose fields are all read as unknown ones, buf[pos:end] (the response's header,
 * checked as protobuf checks it, its fields not wanted): 0, or -1 when it is malformed. */
static int
walk(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end)
{
    while (pos < end) {
        unsigned field, wire;
        if (tag(buf, end, &pos, &field, &wire) < 0 || skip(buf, end, &pos, field, wire, 1) < 0)
            return -1;
    }
    return 0;
}

/* One KeyValue message, buf[pos:end]: into ``out`` if its key is in ``index``. 0, or -1 with
 * an exception set. */
static int
key_value(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, PyObject *index,
          PyObject *out, PyTypeObject *stat_type)
{
    const unsigned char *key = NULL, *value = NULL;
    Py_ssize_t key_len = 0, value_len = 0;
    uint64_t create = 0, mod = 0, version = 0, lease = 0, v;

    while (pos < end) {
        unsigned field, wire;
        if (tag(buf, end, &pos, &field, &wire) < 0)
            goto malformed;
        if ((field == 1 || field == 5) && wire == 2) {
            if (varint(buf, end, &pos, &v) < 0 || v > (uint64_t)(end - pos))
                goto malformed;
            if (field == 1) {
                key = buf + pos;
                key_len = (Py_ssize_t)v;
            } else {
                value = buf + pos;
                value_len = (Py_ssize_t)v;
            }
            pos += (Py_ssize_t)v;
        } else if (field >= 2 && field <= 6 && field != 5 && wire == 0) {
            if (varint(buf, end, &pos, &v) < 0)
                goto malformed;
            if (field == 2)
                create = v;
            else if (field == 3)
                mod = v;
            else if (field == 4)
                version = v;
            else
                lease = v;
        } else if (skip(buf, end, &pos, field, wire, 1) < 0) {
            goto malformed;
        }
    }
    PyObject *k = PyBytes_FromStringAndSize((const char *)(key ? key : buf), key_len);
    if (k == NULL)
        return -1;
    PyObject *at = PyDict_GetItemWithError(index, k); /* borrowed */
    Py_DECREF(k);
    if (at == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t i = PyLong_AsSsize_t(at);
    if (i == -1 && PyErr_Occurred())
        return -1;
    if (i < 0 || i >= PyList_GET_SIZE(out)) {
        PyErr_Format(PyExc_IndexError, "index position %zd outside out's %zd", i,
                     PyList_GET_SIZE(out));
        return -1;
    }
    /* int64 fields: a negative one is its two's complement on the wire */
    PyObject *stat = stat_type->tp_alloc(stat_type, 4);
    if (stat == NULL)
        return -1;
    int64_t zk_version = (int64_t)version;
    PyObject *fields[4] = {
        zk_version > INT64_MIN ? PyLong_FromLongLong(zk_version - 1)
                               : PyLong_FromString("-9223372036854775809", NULL, 10),
        PyLong_FromLongLong((long long)(int64_t)create),
        PyLong_FromLongLong((long long)(int64_t)mod),
        PyLong_FromLongLong((long long)(int64_t)lease),
    };
    for (int n = 0; n < 4; n++) {
        if (fields[n] == NULL) {
            for (int m = 0; m < 4; m++)
                Py_XDECREF(fields[m]);
            Py_DECREF(stat);
            return -1;
        }
    }
    for (int n = 0; n < 4; n++)
        PyTuple_SET_ITEM(stat, n, fields[n]);
    PyObject *val = PyBytes_FromStringAndSize((const char *)(value ? value : buf), value_len);
    if (val == NULL) {
        Py_DECREF(stat);
        return -1;
    }
    PyObject *pair = PyTuple_Pack(2, val, stat);
    Py_DECREF(val);
    Py_DECREF(stat);
    if (pair == NULL)
        return -1;
    return PyList_SetItem(out, i, pair); /* steals pair */

malformed:
    PyErr_SetString(PyExc_ValueError, "a Range response's key-value does not parse");
    return -1;
}

PyDoc_STRVAR(range_into_doc,
"range_into(raw, index, out, stat_type) -> bool\n\n"
"Put each key-value of the serialized RangeResponse ``raw`` whose key is in ``index`` into\n"
"``out`` at its position, as (value, stat_type(version - 1, create_revision, mod_revision,\n"
"lease)); return the response's ``more``. ValueError when ``raw`` does not parse.");

static PyObject *
range_into(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer raw;
    PyObject *index, *out;
    PyTypeObject *stat_type;
    if (!PyArg_ParseTuple(args, "y*O!O!O!", &raw, &PyDict_Type, &index, &PyList_Type, &out,
                          &PyType_Type, &stat_type))
        return NULL;
    if (!PyType_IsSubtype(stat_type, &PyTuple_Type)) {
        PyBuffer_Release(&raw);
        PyErr_SetString(PyExc_TypeError, "stat_type must be a tuple subclass");
        return NULL;
    }
    const unsigned char *buf = raw.buf;
    Py_ssize_t pos = 0, end = raw.len;
    uint64_t v, more = 0;
    while (pos < end) {
        unsigned field, wire;
        if (tag(buf, end, &pos, &field, &wire) < 0)
            goto malformed;
        if (field == 2 && wire == 2) {
            if (varint(buf, end, &pos, &v) < 0 || v > (uint64_t)(end - pos))
                goto malformed;
            if (key_value(buf, pos, pos + (Py_ssize_t)v, index, out, stat_type) < 0) {
                PyBuffer_Release(&raw);
                return NULL;
            }
            pos += (Py_ssize_t)v;
        } else if (field == 1 && wire == 2) {
            if (varint(buf, end, &pos, &v) < 0 || v > (uint64_t)(end - pos)
                    || walk(buf, pos, pos + (Py_ssize_t)v) < 0)
                goto malformed;
            pos += (Py_ssize_t)v;
        } else if (field == 3 && wire == 0) {
            if (varint(buf, end, &pos, &more) < 0)
                goto malformed;
        } else if (skip(buf, end, &pos, field, wire, 0) < 0) {
            goto malformed;
        }
    }
    PyBuffer_Release(&raw);
    return PyBool_FromLong(more != 0);

malformed:
    PyBuffer_Release(&raw);
    PyErr_SetString(PyExc_ValueError, "a Range response does not parse");
    return NULL;
}

static PyMethodDef methods[] = {
    {"range_into", range_into, METH_VARARGS, range_into_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "coordinator._etcd_native",
    .m_doc = "etcd Range responses read in C (optional: coordinator.etcd falls back to "
             "protobuf).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__etcd_native(void)
{
    return PyModule_Create(&module);
}
