/* The call dispatcher's choice: twin of _call._PyCallDispatcherBase.
 * choose() runs on every call of a redirected function, from every thread,
 * while any call redirect of it is live (the other-threads path of the
 * cost target); keep it in sync with _call. */
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *weakrefs;
    PyObject *code_ref, *entries, *key, *shadow, *var; /* code_ref: weak, to the trampoline */
    PyObject *hashed_key; /* the key key_hash belongs to (Python code sets key) */
    Py_hash_t key_hash;
} CallDispObject;

static PyObject *
call_disp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    CallDispObject *self = (CallDispObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    PyObject **fields[] = {&self->code_ref, &self->entries, &self->key, &self->shadow, &self->var,
                           &self->hashed_key};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        Py_INCREF(Py_None);
        *fields[i] = Py_None;
    }
    self->key_hash = -1;
    return (PyObject *)self;
}

/* What an activation's redirect calls instead (a new reference). */
static PyObject *
replacement_of(ActObject *act)
{
    if (!IS_RCORE(act->redirect)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a call activation without a redirect core");
        return NULL;
    }
    PyObject *replacement = ((RCoreObject *)act->redirect)->replacement;
    Py_INCREF(replacement);
    return replacement;
}

/* A function like *shadow* (globals, name, qualname, closure) that runs *code*. */
static PyObject *
reshadow(PyObject *shadow, PyObject *code)
{
    PyFunctionObject *model = (PyFunctionObject *)shadow;
    PyObject *made = PyFunction_NewWithQualName(code, model->func_globals, model->func_qualname);
    if (made == NULL)
        return NULL;
    PyObject *closure = model->func_closure != NULL ? model->func_closure : Py_None;
    if (PyFunction_SetClosure(made, closure) < 0) {
        Py_DECREF(made);
        return NULL;
    }
    Py_INCREF(model->func_name);
    Py_SETREF(((PyFunctionObject *)made)->func_name, model->func_name);
    return made;
}

static PyObject *
call_disp_choose(CallDispObject *self, PyObject *unused)
{
    PyObject *acts;
    if (PyContextVar_Get(self->var, empty_tuple, &acts) < 0)
        return NULL;
    if (PyTuple_Check(acts)) {
        for (Py_ssize_t i = PyTuple_GET_SIZE(acts) - 1; i >= 0; i--) {
            PyObject *act = PyTuple_GET_ITEM(acts, i);
            if (IS_ACT(act) && ((ActObject *)act)->slot == (PyObject *)self &&
                ((ActObject *)act)->open) {
                PyObject *found = replacement_of((ActObject *)act);
                Py_DECREF(acts);
                return found;
            }
        }
    }
    Py_DECREF(acts);
    if (!PyDict_Check(self->entries) || !PyFunction_Check(self->shadow)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a call dispatcher not set up");
        return NULL;
    }
    if (self->hashed_key != self->key) {
        Py_hash_t hash = PyObject_Hash(self->key);
        if (hash == -1)
            return NULL;
        self->key_hash = hash;
        set_field(&self->hashed_key, self->key);
    }
    PyObject *entry = _PyDict_GetItem_KnownHash(self->entries, self->key, self->key_hash);
    if (entry == NULL) {
        if (PyErr_Occurred())
            return NULL;
        /* No activation anywhere: a call that began as the last one ended. */
        Py_INCREF(self->shadow);
        return self->shadow;
    }
    if (!IS_OF(entry, &EntryType)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a registry entry of another kind");
        return NULL;
    }
    PyObject *stack = ((EntryObject *)entry)->stack;
    for (Py_ssize_t i = PyList_GET_SIZE(stack) - 1; i >= 0; i--) {
        PyObject *act = PyList_GET_ITEM(stack, i);
        if (IS_ACT(act) && ((ActObject *)act)->open && ((ActObject *)act)->slot == Py_None) {
            /* The newest open process-scope call activation (not some other
             * redirect of this function's __code__). */
            PyObject *code = PyWeakref_Check(self->code_ref) ? get_ref(self->code_ref) : NULL;
            int ours = code != NULL && ((ActObject *)act)->value == code;
            Py_XDECREF(code);
            if (ours)
                return replacement_of((ActObject *)act);
        }
    }
    PyObject *original = ((EntryObject *)entry)->original;
    if (((PyFunctionObject *)self->shadow)->func_code != original && PyCode_Check(original)) {
        /* The function's code was replaced between two scopes. */
        PyObject *made = reshadow(self->shadow, original);
        if (made == NULL)
            return NULL;
        Py_SETREF(self->shadow, made);
    }
    Py_INCREF(self->shadow);
    return self->shadow;
}

static int
call_disp_traverse(CallDispObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->code_ref);
    Py_VISIT(self->entries);
    Py_VISIT(self->key);
    Py_VISIT(self->shadow);
    Py_VISIT(self->var);
    Py_VISIT(self->hashed_key);
    return 0;
}

static int
call_disp_clear(CallDispObject *self)
{
    Py_CLEAR(self->code_ref);
    Py_CLEAR(self->entries);
    Py_CLEAR(self->key);
    Py_CLEAR(self->shadow);
    Py_CLEAR(self->var);
    Py_CLEAR(self->hashed_key);
    return 0;
}

static void
call_disp_dealloc(CallDispObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    call_disp_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef call_disp_members[] = {
    {"code_ref", T_OBJECT, offsetof(CallDispObject, code_ref), 0, NULL},
    {"entries", T_OBJECT, offsetof(CallDispObject, entries), 0, NULL},
    {"key", T_OBJECT, offsetof(CallDispObject, key), 0, NULL},
    {"shadow", T_OBJECT, offsetof(CallDispObject, shadow), 0, NULL},
    {"var", T_OBJECT, offsetof(CallDispObject, var), 0, NULL},
    {NULL},
};

static PyMethodDef call_disp_methods[] = {
    {"choose", (PyCFunction)call_disp_choose, METH_NOARGS,
     "What a call of the function runs now, in this context."},
    {NULL},
};

PyTypeObject CallDispType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.CallDispatcherBase",
    .tp_doc = "The fields and choice of a call dispatcher (see _call._PyCallDispatcherBase).",
    .tp_basicsize = sizeof(CallDispObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_new = call_disp_new,
    .tp_weaklistoffset = offsetof(CallDispObject, weakrefs),
    .tp_members = call_disp_members,
    .tp_methods = call_disp_methods,
    .tp_traverse = (traverseproc)call_disp_traverse,
    .tp_clear = (inquiry)call_disp_clear,
    .tp_dealloc = (destructor)call_disp_dealloc,
};
