/* The call dispatcher's choice: twin of _call._PyCallDispatcherBase.
 * active() (a redirected plain function's check) or choose() (a trampoline's)
 * runs on every call of a redirected function, from every thread, while any
 * call redirect of it is live (the other-threads path of the cost target);
 * keep them in sync with _call. */
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *weakrefs;
    PyObject *entries, *key, *shadow, *var;
    PyObject *hashed_key; /* the key key_hash belongs to (Python code sets key) */
    Py_hash_t key_hash;
} CallDispObject;

static PyObject *
call_disp_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    CallDispObject *self = (CallDispObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    PyObject **fields[] = {&self->entries, &self->key, &self->shadow, &self->var,
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

/* The body *code* runs (borrowed): for code this dispatcher made (a constant
 * of it is a carrier whose first constant is the dispatcher), the code
 * constant after the carrier, which its check runs, or for a trampoline (none
 * after it) the shadow's code; else *code* itself. Twin of
 * _PyCallDispatcherBase._runs. */
static PyObject *
runs(CallDispObject *self, PyObject *code)
{
    PyObject *consts = ((PyCodeObject *)code)->co_consts;
    Py_ssize_t n = PyTuple_GET_SIZE(consts);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PyTuple_GET_ITEM(consts, i);
        if (PyCode_Check(c)) {
            PyObject *inner = ((PyCodeObject *)c)->co_consts;
            if (PyTuple_GET_SIZE(inner) > 0 && PyTuple_GET_ITEM(inner, 0) == (PyObject *)self) {
                for (Py_ssize_t j = i + 1; j < n; j++)
                    if (PyCode_Check(PyTuple_GET_ITEM(consts, j)))
                        return PyTuple_GET_ITEM(consts, j);
                return ((PyFunctionObject *)self->shadow)->func_code;
            }
        }
    }
    return code;
}

/* The replacement a call runs now (a new reference, in *found*; NULL when the
 * original runs): this context's innermost open activation's, else the
 * newest open process-scope call activation's. *entry* is the registry's
 * entry (borrowed), NULL when there is none. -1 on an error. */
static int
find_replacement(CallDispObject *self, PyObject **found, PyObject **entry)
{
    *found = NULL;
    *entry = NULL;
    PyObject *acts;
    if (PyContextVar_Get(self->var, empty_tuple, &acts) < 0)
        return -1;
    if (PyTuple_Check(acts)) {
        for (Py_ssize_t i = PyTuple_GET_SIZE(acts) - 1; i >= 0; i--) {
            PyObject *act = PyTuple_GET_ITEM(acts, i);
            if (IS_ACT(act) && ((ActObject *)act)->slot == (PyObject *)self &&
                ((ActObject *)act)->open) {
                *found = replacement_of((ActObject *)act);
                Py_DECREF(acts);
                return *found == NULL ? -1 : 0;
            }
        }
    }
    Py_DECREF(acts);
    if (!PyDict_Check(self->entries)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a call dispatcher not set up");
        return -1;
    }
    if (self->hashed_key != self->key) {
        Py_hash_t hash = PyObject_Hash(self->key);
        if (hash == -1)
            return -1;
        self->key_hash = hash;
        set_field(&self->hashed_key, self->key);
    }
    *entry = _PyDict_GetItem_KnownHash(self->entries, self->key, self->key_hash);
    if (*entry == NULL)
        return PyErr_Occurred() ? -1 : 0; /* no activation anywhere */
    if (!IS_OF(*entry, &EntryType)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a registry entry of another kind");
        return -1;
    }
    PyObject *stack = ((EntryObject *)*entry)->stack;
    for (Py_ssize_t i = PyList_GET_SIZE(stack) - 1; i >= 0; i--) {
        ActObject *act = (ActObject *)PyList_GET_ITEM(stack, i);
        /* The newest open process-scope call activation of this function (not
         * some other redirect of its __code__: call redirects carry the
         * dispatcher's own key object). */
        if (IS_ACT(act) && act->open && act->slot == Py_None && IS_RCORE(act->redirect) &&
            ((RCoreObject *)act->redirect)->key == self->key) {
            *found = replacement_of(act);
            return *found == NULL ? -1 : 0;
        }
    }
    return 0;
}

static PyObject *
call_disp_choose(CallDispObject *self, PyObject *unused)
{
    PyObject *found, *entry;
    if (find_replacement(self, &found, &entry) < 0)
        return NULL;
    if (found != NULL)
        return found;
    if (!PyFunction_Check(self->shadow)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a call dispatcher not set up");
        return NULL;
    }
    if (entry != NULL) {
        /* A call that began as the last activation ended finds no entry. */
        PyObject *original = ((EntryObject *)entry)->original;
        PyObject *body = PyCode_Check(original) ? runs(self, original) : NULL;
        if (body != NULL && ((PyFunctionObject *)self->shadow)->func_code != body) {
            /* The function's code was replaced between two scopes. */
            PyObject *made = reshadow(self->shadow, body);
            if (made == NULL)
                return NULL;
            Py_SETREF(self->shadow, made);
        }
    }
    Py_INCREF(self->shadow);
    return self->shadow;
}

static PyObject *
call_disp_active(CallDispObject *self, PyObject *body)
{
    PyObject *found, *entry;
    if (find_replacement(self, &found, &entry) < 0)
        return NULL;
    if (found != NULL) {
        Py_DECREF(found);
        Py_RETURN_TRUE;
    }
    /* A body other than the original the registry restores is stale (the
     * code was built before somebody else replaced the function's): choose()
     * runs the current one. */
    if (entry == NULL)
        Py_RETURN_FALSE;
    PyObject *original = ((EntryObject *)entry)->original;
    if (original == body)
        Py_RETURN_FALSE;
    if (!PyCode_Check(original))
        Py_RETURN_TRUE;
    if (!PyFunction_Check(self->shadow)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: a call dispatcher not set up");
        return NULL;
    }
    return PyBool_FromLong(runs(self, original) != body);
}

static int
call_disp_traverse(CallDispObject *self, visitproc visit, void *arg)
{
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
    {"entries", T_OBJECT, offsetof(CallDispObject, entries), 0, NULL},
    {"key", T_OBJECT, offsetof(CallDispObject, key), 0, NULL},
    {"shadow", T_OBJECT, offsetof(CallDispObject, shadow), 0, NULL},
    {"var", T_OBJECT, offsetof(CallDispObject, var), 0, NULL},
    {NULL},
};

static PyMethodDef call_disp_methods[] = {
    {"choose", (PyCFunction)call_disp_choose, METH_NOARGS,
     "What a call of the function runs now, in this context."},
    {"active", (PyCFunction)call_disp_active, METH_O,
     "Whether a call of the function whose code runs *body* must run choose()'s answer."},
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
