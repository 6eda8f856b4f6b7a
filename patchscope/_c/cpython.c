/* The tp_new slot around deleting a class's __new__: twins of _cpython
 * (preset_new, repair_new, delete_new, object_new). See _cpython.py for
 * why CPython needs the help; here the slot is written directly. */
#include "speedups.h"

PyObject *
call_object_new(PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs > 0 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)) {
        /* With a __new__ installed, object.__new__ rejects extra arguments;
         * without one it ignores them when __init__ is overridden. */
        if (lookup_mro(cls, s_init) == object_init) {
            /* object.__new__'s own message: the type's tp_name. */
            PyErr_Format(PyExc_TypeError, "%.200s() takes no arguments", cls->tp_name);
            return NULL;
        }
    }
    return PyBaseObject_Type.tp_new(cls, empty_tuple, NULL);
}

static int
inherits_object_new(PyTypeObject *type)
{
    return lookup_mro(type, s_new) == object_new;
}

/* type.__subclasses__(type), whatever a metaclass calls __subclasses__:
 * a new list of classes. */
static PyObject *
subclasses_of(PyTypeObject *type)
{
    static PyObject *method; /* type.__dict__["__subclasses__"] */
    if (method == NULL) {
        method = PyObject_GetAttrString((PyObject *)&PyType_Type, "__subclasses__");
        if (method == NULL)
            return NULL;
    }
    PyObject *list = PyObject_CallOneArg(method, (PyObject *)type);
    if (list != NULL && !PyList_Check(list)) {
        Py_DECREF(list);
        PyErr_SetString(PyExc_TypeError, "type.__subclasses__() did not return a list");
        return NULL;
    }
    return list;
}

/* Put object's own tp_new back in *type* and the subclasses that inherited
 * the change, as a class that never had a __new__ would have. */
static int
repair_one(PyTypeObject *type)
{
    if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) ||
        PyType_HasFeature(type, Py_TPFLAGS_IMMUTABLETYPE) || !inherits_object_new(type))
        return 0;
    if (type->tp_new != PyBaseObject_Type.tp_new) {
        type->tp_new = PyBaseObject_Type.tp_new;
        PyType_Modified(type);
    }
    PyObject *subclasses = subclasses_of(type);
    if (subclasses == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subclasses); i++) {
        if (repair_one((PyTypeObject *)PyList_GET_ITEM(subclasses, i)) < 0) {
            Py_DECREF(subclasses);
            return -1;
        }
    }
    Py_DECREF(subclasses);
    return 0;
}

/* The raw __new__ that *type* gets from the classes after *after* in its MRO
 * (borrowed; NULL with an error set, or without one if none has one). */
static PyObject *
new_after_class(PyTypeObject *type, PyTypeObject *after)
{
    PyObject *mro = type->tp_mro;
    Py_ssize_t i = 0, n = mro != NULL ? PyTuple_GET_SIZE(mro) : 0;
    while (i < n && PyTuple_GET_ITEM(mro, i) != (PyObject *)after)
        i++;
    for (i++; i < n; i++) {
        PyTypeObject *klass = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (klass == &PyBaseObject_Type)
            return object_new;
        PyObject *d = own_dict((PyObject *)klass);
        PyObject *raw = d ? PyDict_GetItemWithError(d, s_new) : NULL;
        Py_XDECREF(d); /* the type keeps it alive, and raw with it */
        if (raw != NULL || PyErr_Occurred())
            return raw;
    }
    return NULL;
}

/* The tp_new a class gets by inheriting the raw __new__ *inherited*, when
 * that is a builtin type's own (object's, dict's, ...: they all wrap their
 * type's tp_new the same way); NULL otherwise. */
static newfunc
builtin_tp_new(PyObject *inherited)
{
    if (inherited == NULL || !PyCFunction_Check(inherited) ||
        PyCFunction_GET_FUNCTION(inherited) != PyCFunction_GET_FUNCTION(object_new))
        return NULL;
    PyObject *owner = PyCFunction_GET_SELF(inherited);
    return owner != NULL && PyType_Check(owner) ? ((PyTypeObject *)owner)->tp_new : NULL;
}

/* Before `del root.__new__` (*removed*): give *type* (root or a subclass
 * that gets its __new__ from root) the tp_new of the builtin __new__ it
 * inherits once root's is gone, and the same for its subclasses. The delete
 * keeps a tp_new that is already right (update_one_slot in
 * Objects/typeobject.c), so no construction, in any thread, ever meets the
 * generic "look __new__ up" slot in between. */
static int
preset_one(PyTypeObject *type, PyObject *removed, PyTypeObject *root, newfunc tp_new)
{
    if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) ||
        PyType_HasFeature(type, Py_TPFLAGS_IMMUTABLETYPE))
        return 0;
    if (type->tp_new != tp_new) {
        type->tp_new = tp_new;
        PyType_Modified(type);
    }
    PyObject *subclasses = subclasses_of(type);
    if (subclasses == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subclasses); i++) {
        PyTypeObject *sub = (PyTypeObject *)PyList_GET_ITEM(subclasses, i);
        if (lookup_mro(sub, s_new) != removed)
            continue;
        PyObject *then = new_after_class(sub, root);
        if (then == NULL && PyErr_Occurred()) {
            Py_DECREF(subclasses);
            return -1;
        }
        newfunc sub_new = builtin_tp_new(then);
        if (sub_new != NULL && preset_one(sub, removed, root, sub_new) < 0) {
            Py_DECREF(subclasses);
            return -1;
        }
    }
    Py_DECREF(subclasses);
    return 0;
}

/* preset_one for cls, if it applies: 1 done, 0 not applicable, -1 error. */
static int
preset(PyTypeObject *cls)
{
    PyObject *removed = lookup_mro(cls, s_new);
    PyObject *inherited = new_after_class(cls, cls);
    if (inherited == NULL && PyErr_Occurred())
        return -1;
    newfunc tp_new = builtin_tp_new(inherited);
    if (removed == ABSENT || tp_new == NULL)
        return 0;
    Py_INCREF(removed);
    int failed = preset_one(cls, removed, cls, tp_new) < 0;
    Py_DECREF(removed);
    return failed ? -1 : 1;
}

int
delete_new(PyTypeObject *cls)
{
    int done = preset(cls);
    if (done < 0 || PyObject_DelAttr((PyObject *)cls, s_new) < 0)
        return -1;
    if (!done && inherits_object_new(cls))
        return repair_one(cls);
    return 0;
}

PyObject *
py_preset_new(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "preset_new() takes a class");
        return NULL;
    }
    int done = preset((PyTypeObject *)cls);
    if (done < 0)
        return NULL;
    return PyBool_FromLong(done);
}

PyObject *
py_repair_new(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "repair_new() takes a class");
        return NULL;
    }
    if (repair_one((PyTypeObject *)cls) < 0)
        return NULL;
    Py_RETURN_TRUE;
}
