/* Raw lookups and how targets are named: twins of the parts of _resolve the
 * C operations use (describe, lookup_mro, is_data_descriptor, bind). */
#include "speedups.h"

PyObject *
get_ref(PyObject *ref)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj;
    if (PyWeakref_GetRef(ref, &obj) < 0) {
        PyErr_Clear();
        obj = NULL;
    }
    if (obj == NULL) {
        Py_INCREF(Py_None);
        return Py_None;
    }
    return obj;
#else
    PyObject *obj = PyWeakref_GetObject(ref);
    Py_INCREF(obj);
    return obj;
#endif
}

/* A type's own dict (new reference; builtins keep theirs elsewhere since 3.12). */
static PyObject *
type_dict(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyType_GetDict(tp);
#else
    Py_XINCREF(tp->tp_dict);
    return tp->tp_dict;
#endif
}

PyObject *
own_dict(PyObject *target)
{
    if (PyModule_Check(target)) {
        PyObject *d = PyModule_GetDict(target);
        Py_XINCREF(d);
        return d;
    }
    if (PyType_Check(target))
        return type_dict((PyTypeObject *)target);
    PyObject *d = PyObject_GetAttr(target, s_dict);
    if (d == NULL && PyErr_ExceptionMatches(PyExc_AttributeError))
        PyErr_Clear();
    return d;
}

PyObject *
dict_get(PyObject *d, PyObject *name)
{
    PyObject *value;
    if (PyDict_Check(d)) {
        value = PyDict_GetItemWithError(d, name);
        if (value == NULL)
            value = PyErr_Occurred() ? NULL : ABSENT;
        Py_XINCREF(value);
        return value;
    }
    value = PyObject_GetItem(d, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        Py_INCREF(ABSENT);
        return ABSENT;
    }
    return value;
}

PyObject *
lookup_mro(PyTypeObject *tp, PyObject *name)
{
    PyObject *mro = tp->tp_mro;
    Py_ssize_t n = mro != NULL ? PyTuple_GET_SIZE(mro) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = type_dict((PyTypeObject *)PyTuple_GET_ITEM(mro, i));
        if (d == NULL)
            continue;
        PyObject *value = PyDict_GetItemWithError(d, name);
        Py_DECREF(d); /* the class keeps its dict, and the value, alive */
        if (value != NULL)
            return value;
        if (PyErr_Occurred())
            PyErr_Clear();
    }
    return ABSENT;
}

int
is_data_descriptor(PyObject *value)
{
    return Py_TYPE(value)->tp_descr_set != NULL;
}

PyObject *
bind_raw(PyObject *value, PyObject *instance, PyObject *owner)
{
    descrgetfunc get = Py_TYPE(value)->tp_descr_get;
    if (get == NULL) {
        Py_INCREF(value);
        return value;
    }
    return get(value, instance == Py_None ? NULL : instance, owner == Py_None ? NULL : owner);
}

PyObject *
target_key(PyObject *target, PyObject *name)
{
    PyObject *id = PyLong_FromVoidPtr(target);
    if (id == NULL)
        return NULL;
    PyObject *key = PyTuple_New(2);
    if (key == NULL) {
        Py_DECREF(id);
        return NULL;
    }
    PyTuple_SET_ITEM(key, 0, id);
    Py_INCREF(name);
    PyTuple_SET_ITEM(key, 1, name);
    return key;
}

PyObject *
describe(PyObject *target)
{
    if (PyModule_Check(target)) {
        /* The name the module's dict holds (a module may have lost it). */
        PyObject *name = PyDict_GetItemWithError(PyModule_GetDict(target), s_name);
        if (name == NULL && PyErr_Occurred())
            return NULL;
        if (name != NULL && PyUnicode_Check(name))
            return PyUnicode_FromFormat("<module %R>", name);
        return PyUnicode_FromString("<module '?'>");
    }
    if (PyType_Check(target)) {
        PyObject *module = PyObject_GetAttr(target, s_module);
        PyObject *qualname = module ? PyObject_GetAttr(target, s_qualname) : NULL;
        PyObject *text = qualname ? PyUnicode_FromFormat("<class '%S.%S'>", module, qualname)
                                  : NULL;
        Py_XDECREF(module);
        Py_XDECREF(qualname);
        return text;
    }
    PyObject *tpname = PyObject_GetAttr((PyObject *)Py_TYPE(target), s_name);
    if (tpname == NULL)
        return NULL;
    PyObject *plain = PyUnicode_FromFormat("<%S object at %p>", tpname, target);
    Py_DECREF(tpname);
    if (plain == NULL || Py_TYPE(target)->tp_repr == PyBaseObject_Type.tp_repr)
        return plain;
    PyObject *text = PyObject_Repr(target);
    if (text == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            Py_DECREF(plain); /* KeyboardInterrupt and the like go on */
            return NULL;
        }
        PyErr_Clear();
        return plain;
    }
    Py_DECREF(plain);
    if (PyUnicode_GetLength(text) <= 80)
        return text;
    PyObject *head = PyUnicode_Substring(text, 0, 77);
    Py_DECREF(text);
    if (head == NULL)
        return NULL;
    PyObject *cut = PyUnicode_FromFormat("%U...", head);
    Py_DECREF(head);
    return cut;
}
