/* The with/start() operations of single-attribute redirects with a fixed
 * target and of groups of them: twins of _redirect.activate_locked,
 * _py_activate, _py_with_enter, _py_with_exit (which take both kinds) and
 * _registry.undo_locked. Each is one C call from the with statement (or from
 * start()) to the registry and back: a signal lands before it or after it.
 * Keep in sync. */
#include "speedups.h"

/* The code and instruction offset an activation entered from *frame* is
 * reported at: the caller's, through ExitStack.enter_context. */
static int
site_of(PyObject *frame, PyObject **code, int *lasti)
{
    PyFrameObject *site = (PyFrameObject *)frame;
    Py_INCREF(site);
    PyCodeObject *fcode = PyFrame_GetCode(site);
    if ((PyObject *)fcode == cfg.enter_context) {
        PyFrameObject *back = PyFrame_GetBack(site);
        if (back != NULL) {
            Py_DECREF(site);
            site = back;
            Py_DECREF(fcode);
            fcode = PyFrame_GetCode(site);
        }
    }
#if PY_VERSION_HEX >= 0x030B0000
    *lasti = PyFrame_GetLasti(site);
#else
    *lasti = site->f_lasti < 0 ? -1 : site->f_lasti * (int)sizeof(_Py_CODEUNIT);
#endif
    Py_DECREF(site);
    *code = (PyObject *)fcode;
    return 0;
}

static PyObject *
frame_or_error(void)
{
    PyObject *frame = caller_frame();
    if (frame == NULL)
        PyErr_SetString(PyExc_RuntimeError, "patchscope: no Python frame to pair with");
    return frame;
}

/* A new activation of *redirect* (a fixed-target RedirectCore), prepared
 * as _redirect._new_activation does. */
static ActObject *
prepare(RCoreObject *redirect, PyObject *code, int lasti)
{
    if (redirect->key == Py_None) {
        PyErr_SetString(PyExc_TypeError,
                        "patchscope: a redirect of a dotted path is activated in Python");
        return NULL;
    }
    ActObject *act = act_new((PyObject *)redirect, redirect->value, code, lasti);
    if (act == NULL)
        return NULL;
    if (redirect->spec != Py_None) {
        /* Constructions: what the dispatcher falls back to, refreshed now. */
        PyObject *base = PyObject_GetAttr(redirect->spec, s_base);
        PyObject *inherited = base && PyType_Check(redirect->target)
                                  ? inherited_new((PyTypeObject *)redirect->target)
                                  : NULL;
        int rc = inherited && PyList_Check(base) && PyList_GET_SIZE(base) >= 1
                     ? PyList_SetItem(base, 0, (Py_INCREF(inherited), inherited))
                     : -1;
        if (rc < 0 && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "patchscope: a construction without a fallback");
        Py_XDECREF(base);
        if (rc < 0) {
            Py_DECREF(act);
            return NULL;
        }
    }
    if (redirect->slot != Py_None) /* context-scope constructions and calls */
        set_field(&act->slot, redirect->slot);
    return act;
}

/* Activate *redirect* (either kind) under the lock; the outcomes collect
 * each entered activation for the work after the lock. New handle. */
static PyObject *
activate_locked(PyObject *redirect, PyObject *code, int lasti, Outcomes *outs)
{
    if (IS_RCORE(redirect)) {
        ActObject *act = prepare((RCoreObject *)redirect, code, lasti);
        if (act == NULL)
            return NULL;
        PyObject *conflict;
        if (enter_locked(act, ((RCoreObject *)redirect)->target, &conflict) < 0 ||
            outcome_add(outs, act, 1, conflict, NULL) < 0) {
            Py_DECREF(act);
            return NULL;
        }
        return (PyObject *)act;
    }
    if (!IS_GCORE(redirect)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: not a redirect the accelerator runs");
        return NULL;
    }
    GCoreObject *group = (GCoreObject *)redirect;
    PyObject *parts = group->parts;
    Py_INCREF(parts);
    PyObject *handles = PyList_New(0);
    if (handles == NULL || !PyTuple_Check(parts))
        goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts); i++) {
        PyObject *handle = activate_locked(PyTuple_GET_ITEM(parts, i), code, lasti, outs);
        if (handle == NULL || PyList_Append(handles, handle) < 0) {
            Py_XDECREF(handle);
            goto fail;
        }
        Py_DECREF(handle);
    }
    PyObject *value = group->value;
    if (value == Py_None) {
        value = PyTuple_New(PyList_GET_SIZE(handles));
        if (value == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++)
            PyTuple_SET_ITEM(value, i, handle_value(PyList_GET_ITEM(handles, i)));
    }
    else {
        Py_INCREF(value);
    }
    PyTypeObject *tp = (PyTypeObject *)cfg.group_type;
    GroupHandleObject *handle = (GroupHandleObject *)tp->tp_alloc(tp, 0);
    if (handle == NULL) {
        Py_DECREF(value);
        goto fail;
    }
    Py_INCREF(Py_None);
    handle->frame = Py_None;
    handle->thread_id = PyThread_get_thread_ident();
    handle->parts = handles;
    handle->value = value;
    Py_DECREF(parts);
    return (PyObject *)handle;
fail:
    Py_DECREF(parts);
    Py_XDECREF(handles);
    return NULL;
}

/* Undo the activations in outs[0:n] (a failed entry), under the lock. What
 * undoing them meets is dropped (the caller raises why the entry failed);
 * the conflicts they met entering stay in *outs* for after_undo. */
static void
undo_locked(Outcomes *outs)
{
    PyObject *pending = fetch_exc(); /* why the entry failed: raised again after */
    for (Py_ssize_t i = outs->n - 1; i >= 0; i--) {
        PyObject *conflict, *error;
        exit_locked(outs->items[i].act, &conflict, &error);
        Py_XDECREF(conflict);
        Py_XDECREF(error);
    }
    if (PyErr_Occurred())
        PyErr_Clear();
    if (pending != NULL)
        raise_exc(pending);
}

/* End *handle* after its entry's follow-up work raised (a warning turned
 * into an error): nothing it entered stays installed, then that error. */
void
undo_entered(PyObject *handle, PyObject *handles)
{
    PyObject *pending = fetch_exc();
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    if (lock_take(0) == 0) {
        if (handles != NULL) {
            for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++)
                if (PyList_GET_ITEM(handles, i) == handle) {
                    PyList_SetSlice(handles, i, i + 1, NULL);
                    break;
                }
            set_field(&((HandleObject *)handle)->frame, Py_None);
            if (((HandleObject *)handle)->pushed && forget_node(handles, handle) < 0)
                PyErr_Clear();
        }
        if (stop_handle_locked(handle, &outs) < 0)
            PyErr_Clear();
        lock_give();
        for (Py_ssize_t i = 0; i < outs.n; i++)
            Py_CLEAR(outs.items[i].conflict); /* the warning that raised already said it */
        if (after_all(&outs, 1) < 0)
            PyErr_Clear();
    }
    else {
        PyErr_Clear();
    }
    outcomes_free(&outs);
    raise_exc(pending);
}

/* A signal whose handler raises while __enter__ ran: undo the entry here.
 *
 * CPython 3.14 calls __enter__ with a plain CALL, which runs pending signal
 * handlers when it returns, before the with statement's handler is in place
 * (CPython gh-148874, fixed in 3.15 and later 3.14 releases): an exception
 * raised there skips __exit__. Running the handlers at the end of
 * __enter__ instead, and undoing the entry when one raises, leaves only the
 * few instructions between here and the return for a signal to land in. */
int
entry_signals(void)
{
#if PY_VERSION_HEX >= 0x030E0000
    return PyErr_CheckSignals();
#else
    return 0; /* BEFORE_WITH calls __enter__ and takes over in one step */
#endif
}

/* activate: the handle of one new activation of *redirect*, from *code*. */
PyObject *
activate_any(PyObject *redirect, PyObject *code, int lasti)
{
    REQUIRE_CONFIGURED(NULL)
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    if (lock_take(1) < 0)
        return NULL;
    PyObject *handle = activate_locked(redirect, code, lasti, &outs);
    if (handle == NULL)
        undo_locked(&outs);
    lock_give();
    if (handle == NULL) {
        after_undo(&outs);
        return NULL;
    }
    if (after_all(&outs, 0) < 0) {
        undo_entered(handle, NULL);
        Py_DECREF(handle);
        return NULL;
    }
    return handle;
}

static PyObject *
c_activate(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int lasti;
    if (nargs != 2 || ((lasti = (int)PyLong_AsLong(args[1])) == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_activate(code, lasti)");
        return NULL;
    }
    return activate_any(self, args[0], lasti);
}

static PyObject *
c_with_enter(PyObject *self, PyObject *unused)
{
    REQUIRE_CONFIGURED(NULL)
    PyObject *frame = frame_or_error();
    if (frame == NULL)
        return NULL;
    Py_INCREF(frame);
    PyObject *code;
    int lasti;
    site_of(frame, &code, &lasti);
    PyObject *handles = IS_RCORE(self) ? ((RCoreObject *)self)->handles
                                                              : ((GCoreObject *)self)->handles;
    Py_INCREF(handles);
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    PyObject *handle = NULL, *result = NULL;
    if (lock_take(1) < 0)
        goto done;
    handle = activate_locked(self, code, lasti, &outs);
    if (handle != NULL && pair_enter(handles, handle, frame) < 0) {
        Py_CLEAR(handle);
    }
    if (handle == NULL)
        undo_locked(&outs);
    lock_give();
    if (handle == NULL) {
        after_undo(&outs);
        goto done;
    }
    if (after_all(&outs, 0) < 0) {
        undo_entered(handle, handles);
        goto done;
    }
    if (((HandleObject *)handle)->pushed && pair_push(handles, handle) < 0) {
        undo_entered(handle, handles);
        goto done;
    }
    if (entry_signals() < 0) {
        undo_entered(handle, handles);
        goto done;
    }
    result = IS_RCORE(self) ? (Py_INCREF(((RCoreObject *)self)->replacement),
                                                     ((RCoreObject *)self)->replacement)
                                                  : handle_value(handle);
done:
    outcomes_free(&outs);
    Py_XDECREF(handle);
    Py_DECREF(handles);
    Py_DECREF(code);
    Py_DECREF(frame);
    return result;
}

static PyObject *
c_with_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    REQUIRE_CONFIGURED(NULL)
    PyObject *frame = frame_or_error();
    if (frame == NULL)
        return NULL;
    PyObject *handles = IS_RCORE(self) ? ((RCoreObject *)self)->handles
                                                              : ((GCoreObject *)self)->handles;
    Py_INCREF(handles);
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    int rc = -1;
    if (lock_take(0) < 0) {
        Py_DECREF(handles);
        return NULL;
    }
    PyObject *handle = pair_exit(handles, frame);
    if (handle != NULL) {
        rc = stop_handle_locked(handle, &outs);
        Py_DECREF(handle);
    }
    lock_give();
    Py_DECREF(handles);
    if (handle == NULL) {
        outcomes_free(&outs);
        return NULL;
    }
    return after_stop(&outs, !IS_RCORE(self), rc);
}

PyMethodDef rcore_methods[] = {
    {"_c_activate", (PyCFunction)(void (*)(void))c_activate, METH_FASTCALL,
     "_activate(code, lasti): a new live Activation (twin of _redirect._py_activate)."},
    {"_c_with_enter", (PyCFunction)c_with_enter, METH_NOARGS,
     "__enter__ (twin of _redirect._py_with_enter)."},
    {"_c_with_exit", (PyCFunction)(void (*)(void))c_with_exit, METH_FASTCALL,
     "__exit__ (twin of _redirect._py_with_exit)."},
    {NULL},
};

PyMethodDef gcore_methods[] = {
    {"_c_activate", (PyCFunction)(void (*)(void))c_activate, METH_FASTCALL,
     "_activate(code, lasti): a new live ActivationGroup (twin of _redirect._py_activate)."},
    {"_c_with_enter", (PyCFunction)c_with_enter, METH_NOARGS,
     "__enter__ (twin of _redirect._py_with_enter on a group)."},
    {"_c_with_exit", (PyCFunction)(void (*)(void))c_with_exit, METH_FASTCALL,
     "__exit__ (twin of _redirect._py_with_exit on a group)."},
    {NULL},
};

/* ------------------------------------------------------------------------ */
/* AttrFactory: redirect_attr as one C call (twin of _redirect.redirect_attr,
 * whose checks and messages it repeats; keep them in sync). It carries the
 * Python function's __doc__, __signature__ and __wrapped__. */

typedef struct {
    PyObject_HEAD
    PyObject *reference, *attr_type, *path_type, *keywords, *checked, *dict;
    vectorcallfunc vectorcall;
} FactoryObject;

static PyObject *s_create, *s_scope, *s_process_scope, *s_context_scope;

static int
check_name(FactoryObject *self, PyObject *name)
{
    if (!PyUnicode_Check(name)) {
        PyObject *tpname = PyObject_GetAttr((PyObject *)Py_TYPE(name), s_name);
        if (tpname != NULL) {
            PyErr_Format(PyExc_TypeError, "attribute name must be a str, got %U %R", tpname,
                         name);
            Py_DECREF(tpname);
        }
        return -1;
    }
    int known = PySet_Contains(self->checked, name);
    if (known != 0)
        return known < 0 ? -1 : 0;
    int keyword = PySet_Contains(self->keywords, name);
    if (keyword < 0)
        return -1;
    if (!PyUnicode_IsIdentifier(name) || keyword) {
        PyErr_Format(PyExc_ValueError,
                     "attribute name must be a plain identifier, got %R; dotted paths go in "
                     "the target (redirect_attr('pkg.mod', 'name', ...))",
                     name);
        return -1;
    }
    return PySet_Add(self->checked, name);
}

static PyObject *
factory_vectorcall(FactoryObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *target = NULL, *name = NULL, *replacement = NULL, *create = Py_False,
             *scope = s_process_scope;
    if (nargs > 3) {
        PyErr_Format(PyExc_TypeError,
                     "redirect_attr() takes 3 positional arguments but %zd were given", nargs);
        return NULL;
    }
    PyObject **positional[] = {&target, &name, &replacement};
    for (Py_ssize_t i = 0; i < nargs; i++)
        *positional[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        PyObject **slot = NULL;
        if (PyUnicode_CompareWithASCIIString(key, "target") == 0)
            slot = &target;
        else if (PyUnicode_CompareWithASCIIString(key, "name") == 0)
            slot = &name;
        else if (PyUnicode_CompareWithASCIIString(key, "replacement") == 0)
            slot = &replacement;
        else if (key == s_create || PyUnicode_Compare(key, s_create) == 0)
            slot = &create;
        else if (key == s_scope || PyUnicode_Compare(key, s_scope) == 0)
            slot = &scope;
        if (slot == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "redirect_attr() got an unexpected keyword argument %R", key);
            return NULL;
        }
        if ((slot == &target || slot == &name || slot == &replacement) && *slot != NULL) {
            PyErr_Format(PyExc_TypeError, "redirect_attr() got multiple values for argument %R",
                         key);
            return NULL;
        }
        *slot = value;
    }
    if (replacement == NULL && target != NULL && name != NULL)
        /* redirect_attr("pkg.mod.name", replacement): the twin splits the path. */
        return PyObject_Vectorcall(self->reference, args, nargsf, kwnames);
    if (target == NULL || name == NULL || replacement == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "redirect_attr() missing required arguments: target, name, replacement");
        return NULL;
    }
    if (check_name(self, name) < 0)
        return NULL;
    if (scope != s_process_scope && scope != s_context_scope &&
        !(PyUnicode_Check(scope) && (PyUnicode_Compare(scope, s_process_scope) == 0 ||
                                     PyUnicode_Compare(scope, s_context_scope) == 0))) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "scope must be 'process' or 'context', got %R", scope);
        return NULL;
    }
    int yes = PyObject_IsTrue(create);
    if (yes < 0)
        return NULL;
    PyObject *flag = yes ? Py_True : Py_False;
    if (PyUnicode_CheckExact(target)) /* as the twin's type(target) is str */
        return PyObject_CallFunctionObjArgs(self->path_type, target, name, replacement, flag,
                                            scope, NULL);
    PyObject *call[] = {target, name, replacement, flag, scope};
    return rcore_new_attr(self->attr_type, call, 5);
}

static PyObject *
factory_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *reference, *attr_type, *path_type, *keywords;
    if (!PyArg_ParseTuple(args, "OO!O!O!:AttrFactory", &reference, &PyType_Type, &attr_type,
                          &PyType_Type, &path_type, &PyFrozenSet_Type, &keywords))
        return NULL;
    if (s_create == NULL) {
        s_create = PyUnicode_InternFromString("create");
        s_scope = PyUnicode_InternFromString("scope");
        s_process_scope = PyUnicode_InternFromString("process");
        s_context_scope = PyUnicode_InternFromString("context");
        if (!s_create || !s_scope || !s_process_scope || !s_context_scope)
            return NULL;
    }
    FactoryObject *self = (FactoryObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->checked = PySet_New(NULL);
    if (self->checked == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject **fields[] = {&self->reference, &self->attr_type, &self->path_type, &self->keywords};
    PyObject *values[] = {reference, attr_type, path_type, keywords};
    for (size_t i = 0; i < 4; i++) {
        Py_INCREF(values[i]);
        *fields[i] = values[i];
    }
    self->vectorcall = (vectorcallfunc)factory_vectorcall;
    return (PyObject *)self;
}

static int
factory_traverse(FactoryObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->reference);
    Py_VISIT(self->attr_type);
    Py_VISIT(self->path_type);
    Py_VISIT(self->dict);
    return 0;
}

static int
factory_clear(FactoryObject *self)
{
    Py_CLEAR(self->reference);
    Py_CLEAR(self->attr_type);
    Py_CLEAR(self->path_type);
    Py_CLEAR(self->keywords);
    Py_CLEAR(self->checked);
    Py_CLEAR(self->dict);
    return 0;
}

static void
factory_dealloc(FactoryObject *self)
{
    PyObject_GC_UnTrack(self);
    factory_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyGetSetDef factory_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

PyTypeObject FactoryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.AttrFactory",
    .tp_doc = "redirect_attr in C (see _redirect.redirect_attr, its __wrapped__).",
    .tp_basicsize = sizeof(FactoryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = factory_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(FactoryObject, vectorcall),
    .tp_dictoffset = offsetof(FactoryObject, dict),
    .tp_getset = factory_getset,
    .tp_traverse = (traverseproc)factory_traverse,
    .tp_clear = (inquiry)factory_clear,
    .tp_dealloc = (destructor)factory_dealloc,
};
