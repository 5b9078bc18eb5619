/* The full UpdateMetadata's entries made in C: statemachines.full_metadata._entries_python,
 * natively.
 *
 * entries(tps, leaders, replicas, dead, entry_type, leader_type, skip_missing) makes, for
 * each partition of the iterable ``tps`` (TopicPartition: a tuple of topic and number), the
 * entry the Python function makes:
 *
 *     entry_type(topic, partition, v.controller_epoch, v.leader, v.leader_epoch, v.isr,
 *                v.partition_epoch, replicas[tp], the replicas of replicas[tp] in dead)
 *
 * with v = leaders[tp] (a leader_type: a tuple of leader, leader_epoch, isr, controller_epoch,
 * partition_epoch, elections.leader.LeaderAndIsr), made as tuple.__new__ makes it. It returns
 * (entries, partitions), two lists in the order of ``tps``. A partition missing from
 * ``leaders`` or ``replicas`` is left out with ``skip_missing``, else the answer is None.
 * ``leaders`` and ``replicas`` are dicts, ``dead`` a set or frozenset of broker ids; the
 * offline replicas are worked out once per distinct replica list, as the Python function does.
 *
 * Its inputs are the controller's own view, already parsed; a value of another type than
 * these raises TypeError, and nothing is changed. The Python function stays the reference and
 * the fallback where this module is not built.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define ENTRY_FIELDS 9

/* A dict's item by a hash worked out already (one hash of a partition for two dicts): the
 * interpreter's own call where its headers have it. */
#if PY_VERSION_HEX < 0x030D0000
#define GET_KNOWN_HASH(d, k, h) _PyDict_GetItem_KnownHash((d), (k), (h))
#else
#define GET_KNOWN_HASH(d, k, h) ((void)(h), PyDict_GetItemWithError((d), (k)))
#endif

/* Which fields of a leader_type tuple go where in an entry. */
enum { L_LEADER, L_EPOCH, L_ISR, L_CONTROLLER_EPOCH, L_PARTITION_EPOCH, LEADER_FIELDS };

/* The replicas of ``replicas`` (a tuple) that are in ``dead``, a new tuple; NULL on error. */
static PyObject *
offline_of(PyObject *replicas, PyObject *dead)
{
    Py_ssize_t n = PyTuple_GET_SIZE(replicas), k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int in = PySet_Contains(dead, PyTuple_GET_ITEM(replicas, i));
        if (in < 0)
            return NULL;
        k += in;
    }
    PyObject *out = PyTuple_New(k);
    if (out == NULL)
        return NULL;
    Py_ssize_t j = 0;
    for (Py_ssize_t i = 0; i < n && j < k; i++) {
        PyObject *r = PyTuple_GET_ITEM(replicas, i);
        int in = PySet_Contains(dead, r);
        if (in < 0) {
            Py_DECREF(out);
            return NULL;
        }
        if (in) {
            Py_INCREF(r);
            PyTuple_SET_ITEM(out, j++, r);
        }
    }
    if (j < k) {  /* (a replica's membership changed between the two passes) */
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "the dead brokers changed while read");
        return NULL;
    }
    return out;
}

PyDoc_STRVAR(entries_doc,
"entries(tps, leaders, replicas, dead, entry_type, leader_type, skip_missing)\n"
"-> (entries, partitions) | None\n\n"
"The UpdateMetadata entries of ``tps``, as statemachines.full_metadata._entries_python "
"makes them.");

static PyObject *
entries(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *tps, *leaders, *replicas_of, *dead, *entry_obj, *leader_obj;
    int skip_missing;
    if (!PyArg_ParseTuple(args, "OO!O!OOOp", &tps, &PyDict_Type, &leaders, &PyDict_Type,
                          &replicas_of, &dead, &entry_obj, &leader_obj, &skip_missing))
        return NULL;
    if (!PyAnySet_Check(dead)) {
        PyErr_SetString(PyExc_TypeError, "dead must be a set or frozenset");
        return NULL;
    }
    if (!PyType_Check(entry_obj) || !PyType_IsSubtype((PyTypeObject *)entry_obj, &PyTuple_Type)
            || !PyType_Check(leader_obj)
            || !PyType_IsSubtype((PyTypeObject *)leader_obj, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "entry_type and leader_type must be tuple types");
        return NULL;
    }
    PyTypeObject *entry_type = (PyTypeObject *)entry_obj;
    PyTypeObject *leader_type = (PyTypeObject *)leader_obj;
    int any_dead = PySet_GET_SIZE(dead) > 0;

    PyObject *out = PyList_New(0), *order = PyList_New(0), *offline = PyDict_New();
    PyObject *it = PyObject_GetIter(tps), *tp = NULL, *v = NULL, *replicas = NULL;
    PyObject *result = NULL;
    if (out == NULL || order == NULL || offline == NULL || it == NULL)
        goto done;
    while ((tp = PyIter_Next(it)) != NULL) {
        if (!PyTuple_Check(tp) || PyTuple_GET_SIZE(tp) != 2) {
            PyErr_SetString(PyExc_TypeError, "a partition is not a (topic, partition) tuple");
            goto done;
        }
        Py_hash_t hash = PyObject_Hash(tp);  /* (once for both dicts) */
        if (hash == -1)
            goto done;
        /* (held, not borrowed: an allocation below may collect, and a finalizer run) */
        v = GET_KNOWN_HASH(leaders, tp, hash);
        Py_XINCREF(v);
        if (v != NULL) {
            replicas = GET_KNOWN_HASH(replicas_of, tp, hash);
            Py_XINCREF(replicas);
        }
        if (replicas == NULL) {
            if (PyErr_Occurred())
                goto done;
            if (skip_missing) {
                Py_CLEAR(v);
                Py_CLEAR(tp);
                continue;
            }
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (Py_TYPE(v) != leader_type || PyTuple_GET_SIZE(v) != LEADER_FIELDS) {
            PyErr_SetString(PyExc_TypeError, "a partition's leader is not a LeaderAndIsr");
            goto done;
        }
        if (!PyTuple_Check(replicas)) {
            PyErr_SetString(PyExc_TypeError, "a partition's replicas are not a tuple");
            goto done;
        }
        PyObject *off;  /* a new reference */
        if (any_dead) {
            off = PyDict_GetItemWithError(offline, replicas);
            if (off != NULL) {
                Py_INCREF(off);
            } else {
                if (PyErr_Occurred() || (off = offline_of(replicas, dead)) == NULL)
                    goto done;
                if (PyDict_SetItem(offline, replicas, off) < 0) {
                    Py_DECREF(off);
                    goto done;
                }
            }
        } else if ((off = PyTuple_New(0)) == NULL) {
            goto done;
        }
        PyObject *entry = entry_type->tp_alloc(entry_type, ENTRY_FIELDS);
        if (entry == NULL) {
            Py_DECREF(off);
            goto done;
        }
        PyObject *fields[ENTRY_FIELDS] = {
            PyTuple_GET_ITEM(tp, 0), PyTuple_GET_ITEM(tp, 1),
            PyTuple_GET_ITEM(v, L_CONTROLLER_EPOCH), PyTuple_GET_ITEM(v, L_LEADER),
            PyTuple_GET_ITEM(v, L_EPOCH), PyTuple_GET_ITEM(v, L_ISR),
            PyTuple_GET_ITEM(v, L_PARTITION_EPOCH), replicas, off,
        };
        for (int i = 0; i < ENTRY_FIELDS - 1; i++)
            PyTuple_SET_ITEM(entry, i, Py_NewRef(fields[i]));
        PyTuple_SET_ITEM(entry, ENTRY_FIELDS - 1, off);  /* (its reference moves in) */
        int failed = PyList_Append(out, entry);
        Py_DECREF(entry);
        if (failed || PyList_Append(order, tp) < 0)
            goto done;
        Py_CLEAR(replicas);
        Py_CLEAR(v);
        Py_CLEAR(tp);
    }
    if (!PyErr_Occurred())
        result = PyTuple_Pack(2, out, order);

done:
    Py_XDECREF(replicas);
    Py_XDECREF(v);
    Py_XDECREF(tp);
    Py_XDECREF(it);
    Py_XDECREF(offline);
    Py_XDECREF(order);
    Py_XDECREF(out);
    return result;
}

static PyMethodDef methods[] = {
    {"entries", entries, METH_VARARGS, entries_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "statemachines._metadata_native",
    .m_doc = "The full UpdateMetadata's entries made in C (optional: "
             "statemachines.full_metadata falls back to Python).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__metadata_native(void)
{
    return PyModule_Create(&module);
}
