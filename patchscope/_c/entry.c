/* Restoration semantics: twins of _entry.capture (with _missing),
 * _entry.show and _entry._write. Keep in sync. */
#include "speedups.h"

static int
is_dunder(PyObject *name)
{
    return PyUnicode_GetLength(name) >= 2 && PyUnicode_READ_CHAR(name, 0) == '_' &&
           PyUnicode_READ_CHAR(name, 1) == '_';
}

/* _own: capture of a raw value found in the target's __dict__. */
static void
own(PyObject *raw, int *kind, PyObject **original, PyObject **installed)
{
    PyObject *stood_for = displaced(raw);
    Py_INCREF(raw);
    *installed = raw;
    Py_INCREF(stood_for);
    *original = stood_for;
    /* A slot or dispatcher of ours that nothing accounts for: what it stood
     * in place of is the original, and the first write replaces it. */
    *kind = stood_for == raw || stood_for != ABSENT ? OWN : SHADOW;
}

static int
missing(PyObject *target, PyObject *name)
{
    PyObject *shown = describe(target);
    if (shown == NULL)
        return -1;
    PyObject *msg = PyUnicode_FromFormat(
        "%U has no attribute %R; pass create=True to add it for the duration of the redirect",
        shown, name);
    Py_DECREF(shown);
    if (msg != NULL) {
        PyErr_SetObject(cfg.missing_error, msg);
        Py_DECREF(msg);
        /* raise ... from None, as the twin: a traceback shows neither the
         * lookup's AttributeError nor what was being handled (a generator's
         * GeneratorExit, say) as where this came from. */
        PyObject *exc = fetch_exc();
        if (exc != NULL) {
            PyException_SetCause(exc, NULL); /* also sets __suppress_context__ */
            raise_exc(exc);
        }
    }
    return -1;
}

static void
absent3(int k, int *kind, PyObject **original, PyObject **installed)
{
    *kind = k;
    Py_INCREF(ABSENT);
    *original = ABSENT;
    Py_INCREF(ABSENT);
    *installed = ABSENT;
}

/* _own_setattr: whether instances of *tp* keep attributes their own way. */
static int
own_setattr(PyTypeObject *tp)
{
    return lookup_mro(tp, s_setattr) != object_setattr || lookup_mro(tp, s_getattr) != ABSENT;
}

int
capture(PyObject *target, PyObject *name, int create, int *kind, PyObject **original,
        PyObject **installed)
{
    PyObject *d = own_dict(target);
    if (d == NULL && PyErr_Occurred())
        return -1;
    PyTypeObject *tp = Py_TYPE(target);
    PyObject *meta = ABSENT;
    int rc = 0;
    if ((tp == &PyModule_Type || tp == &PyType_Type) && !is_dunder(name)) {
        /* No data descriptor of ModuleType or type has a plain name. */
        PyObject *raw = dict_get(d, name);
        if (raw == NULL)
            goto error;
        if (raw != ABSENT) {
            own(raw, kind, original, installed);
            Py_DECREF(raw);
            goto done;
        }
        Py_DECREF(raw);
    }
    else {
        if (PyModule_Check(target))
            tp = own_class(target); /* our per-name slots are not the target's */
        meta = lookup_mro(tp, name);
        if (meta != ABSENT && is_data_descriptor(meta)) {
            /* __slots__ members, properties with setters, type.__doc__ ...:
             * the object's own setattr is the only correct way back. */
            PyObject *value = PyObject_GetAttr(target, name);
            if (value == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                    goto error;
                PyErr_Clear();
                if (!create) {
                    missing(target, name);
                    goto error;
                }
                absent3(SETATTR, kind, original, installed);
                goto done;
            }
            *kind = SETATTR;
            *original = value;
            Py_INCREF(value);
            *installed = value;
            goto done;
        }
        if (d != NULL && (PyDict_Check(d) || Py_IS_TYPE(d, &PyDictProxy_Type))) {
            int has = PySequence_Contains(d, name);
            if (has < 0)
                goto error;
            if (has) {
                PyObject *raw = PyObject_GetItem(d, name);
                if (raw == NULL)
                    goto error;
                own(raw, kind, original, installed);
                Py_DECREF(raw);
                goto done;
            }
        }
    }
    {
        PyObject *value = PyObject_GetAttr(target, name);
        if (value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                goto error;
            PyErr_Clear();
            if (!create) {
                missing(target, name);
                goto error;
            }
            /* Created through the object's own setattr (an nn.Module
             * parameter): deleted again through its delattr. */
            absent3(!PyType_Check(target) && !PyModule_Check(target) && own_setattr(tp) ? SETATTR
                                                                                       : SHADOW,
                    kind, original, installed);
            goto done;
        }
        if (meta == ABSENT && !PyType_Check(target) && !PyModule_Check(target)) {
            /* An instance attribute served by the class's __getattr__
             * (nn.Module parameters, buffers and sub-modules; a __slots__
             * class's store): the class's setattr owns it. */
            *kind = SETATTR;
            *original = value;
            Py_INCREF(value);
            *installed = value;
            goto done;
        }
        Py_DECREF(value);
        absent3(SHADOW, kind, original, installed);
    }
done:
    Py_XDECREF(d);
    return rc;
error:
    Py_XDECREF(d);
    return -1;
}

/* process_value: borrowed (the process value, as _entry.show computes it). */
static PyObject *
process_value(EntryObject *entry)
{
    PyObject *stack = entry->stack;
    for (Py_ssize_t i = PyList_GET_SIZE(stack) - 1; i >= 0; i--) {
        ActObject *act = (ActObject *)PyList_GET_ITEM(stack, i);
        if (act->open && !act->ctx)
            return act->value;
    }
    if (entry->kind == OWN || entry->kind == SETATTR)
        return entry->original;
    return ABSENT;
}

/* _write: setattr, or for ABSENT the deletion that takes a shadow away. */
static int
write_value(PyObject *target, PyObject *name, PyObject *value)
{
    if (Py_IS_TYPE(target, &PyModule_Type) && !is_dunder(name)) {
        /* What setattr does for a module of the plain module class and a
         * name no descriptor of that class has: the module's dict. */
        PyObject *d = PyModule_GetDict(target);
        if (value != ABSENT)
            return PyDict_SetItem(d, name, value);
        if (PyDict_DelItem(d, name) < 0) {
            if (PyErr_ExceptionMatches(PyExc_KeyError)) {
                PyErr_Clear();
                PyErr_SetObject(PyExc_AttributeError, name);
            }
            return -1;
        }
        return 0;
    }
    if (value != ABSENT)
        return PyObject_SetAttr(target, name, value);
    if (PyType_Check(target) && PyUnicode_Compare(name, s_new) == 0)
        return delete_new((PyTypeObject *)target);
    return PyObject_DelAttr(target, name);
}

/* getattr(target, name, ABSENT): a new reference, or NULL on another error. */
static PyObject *
getattr_or_absent(PyObject *target, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(target, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        value = ABSENT;
        Py_INCREF(value);
    }
    return value;
}

static int
check_stack(EntryObject *entry)
{
    PyObject *stack = entry->stack;
    if (!PyList_Check(stack))
        goto bad;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stack); i++)
        if (!IS_ACT(PyList_GET_ITEM(stack, i)))
            goto bad;
    return 0;
bad:
    PyErr_SetString(PyExc_TypeError, "patchscope: a registry entry holds something else");
    return -1;
}

int
show(EntryObject *entry, PyObject **conflict)
{
    *conflict = NULL;
    if (check_stack(entry) < 0)
        return -1;
    PyObject *target = entry->target, *name = entry->name;
    Py_INCREF(target);
    Py_INCREF(name);
    PyObject *value = process_value(entry);
    Py_INCREF(value);
    PyObject *current = NULL, *slot = NULL;
    int rc = -1;
    if (entry->kind == SETATTR) {
        /* Context scope is refused for these; the object's own setattr rules. */
        current = getattr_or_absent(target, name);
        if (current == NULL)
            goto done;
        if (current != entry->installed) {
            Py_INCREF(current);
            *conflict = current;
        }
        if (current != value) {
            if (write_value(target, name, value) < 0)
                goto done;
            /* What the object now gives, which its setter may have converted. */
            PyObject *now = getattr_or_absent(target, name);
            if (now == NULL)
                goto done;
            Py_SETREF(entry->installed, now);
        }
        else {
            set_field(&entry->installed, current);
        }
        rc = 0;
        goto done;
    }
    {
        PyObject *d = own_dict(target);
        if (d == NULL) {
            if (!PyErr_Occurred()) {
                /* What reading target.__dict__ raises, as in _entry.show. */
                d = PyObject_GetAttr(target, s_dict);
                if (d != NULL) {
                    Py_DECREF(d);
                    PyErr_SetString(PyExc_TypeError, "patchscope: the target has no __dict__");
                }
            }
            goto done;
        }
        current = dict_get(d, name);
        Py_DECREF(d);
        if (current == NULL)
            goto done;
    }
    if (current != entry->installed) {
        Py_INCREF(current);
        *conflict = current;
    }
    ActObject *first_context = NULL;
    PyObject *stack = entry->stack;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stack); i++) {
        ActObject *act = (ActObject *)PyList_GET_ITEM(stack, i);
        if (act->open && act->ctx) {
            first_context = act;
            break;
        }
    }
    slot = entry->slot;
    Py_INCREF(slot);
    PyObject *desired = value;
    if (first_context != NULL) {
        if (slot == Py_None) {
            Py_INCREF(first_context);
            PyObject *made = slot_install(entry, first_context, value);
            Py_DECREF(first_context);
            if (made == NULL)
                goto done;
            Py_INCREF(made);
            Py_SETREF(slot, made);
        }
        if (!PyModule_Check(target)) {
            set_field(&((ClassSlotObject *)slot)->fallback, value);
            desired = slot;
        }
    }
    if (current != desired && write_value(target, name, desired) < 0)
        goto done;
    set_field(&entry->installed, desired);
    /* After the write: a class never holds a slot that has let go. */
    if (first_context == NULL && slot != Py_None && slot_uninstall(entry) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0)
        Py_CLEAR(*conflict);
    Py_XDECREF(current);
    Py_XDECREF(slot);
    Py_DECREF(value);
    Py_DECREF(target);
    Py_DECREF(name);
    return rc;
}
