/* The decorators' activations: twins of _decorate._PyGuard and
 * _PyCallWrapper, for redirects the accelerator runs. A decorated call
 * activates, calls and ends in this one C call; a generator's steps and a
 * coroutine's run sit in `with guard:` blocks of the Python drivers, so the
 * activation and its end are each one step of the with statement. Keep in
 * sync. */
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *redirect, *code, *handle;
    vectorcallfunc vectorcall;
} GuardObject;

static PyObject *
guard_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *redirect, *code;
    if (!PyArg_ParseTuple(args, "OO", &redirect, &code))
        return NULL;
    if (!IS_RCORE(redirect) && !IS_GCORE(redirect)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: not a redirect the accelerator runs");
        return NULL;
    }
    GuardObject *self = (GuardObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(redirect);
    self->redirect = redirect;
    Py_INCREF(code);
    self->code = code;
    Py_INCREF(Py_None);
    self->handle = Py_None;
    return (PyObject *)self;
}

static int
guard_traverse(GuardObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->redirect);
    Py_VISIT(self->code);
    Py_VISIT(self->handle);
    return 0;
}

static int
guard_clear(GuardObject *self)
{
    Py_CLEAR(self->redirect);
    Py_CLEAR(self->code);
    Py_CLEAR(self->handle);
    return 0;
}

static void
guard_dealloc(GuardObject *self)
{
    PyObject_GC_UnTrack(self);
    guard_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
guard_enter(GuardObject *self, PyObject *unused)
{
    if (self->handle != Py_None) {
        PyErr_SetString(PyExc_RuntimeError, "a guard holds one activation at a time");
        return NULL;
    }
    PyObject *handle = activate_any(self->redirect, self->code, 0);
    if (handle == NULL)
        return NULL;
    if (entry_signals() < 0) {
        /* See entry_signals: end it here, then raise what the handler raised. */
        PyObject *pending = fetch_exc();
        PyObject *done = stop_any(handle);
        Py_DECREF(handle);
        Py_XDECREF(done);
        if (done == NULL)
            PyErr_Clear();
        raise_exc(pending);
        return NULL;
    }
    Py_SETREF(self->handle, handle);
    Py_RETURN_NONE;
}

static PyObject *
guard_exit(GuardObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *handle = self->handle;
    Py_INCREF(Py_None);
    self->handle = Py_None;
    if (handle == Py_None) {
        Py_DECREF(handle);
        Py_RETURN_NONE;
    }
    PyObject *done = stop_any(handle);
    Py_DECREF(handle);
    if (done == NULL)
        return NULL;
    Py_DECREF(done);
    Py_RETURN_NONE;
}

static PyMethodDef guard_methods[] = {
    {"__enter__", (PyCFunction)guard_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))guard_exit, METH_FASTCALL, NULL},
    {NULL},
};

PyTypeObject GuardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.Guard",
    .tp_doc = "A single-use context manager that activates a redirect (see _decorate._PyGuard).",
    .tp_basicsize = sizeof(GuardObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = guard_new,
    .tp_traverse = (traverseproc)guard_traverse,
    .tp_clear = (inquiry)guard_clear,
    .tp_dealloc = (destructor)guard_dealloc,
    .tp_methods = guard_methods,
};

/* ------------------------------------------------------------------------ */

static PyObject *
wrapper_vectorcall(GuardObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 4 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "wrapper(wrapped, instance, args, kwargs)");
        return NULL;
    }
    PyObject *wrapped = args[0], *call_args = args[2], *kwargs = args[3];
    if (!PyTuple_Check(call_args)) {
        PyErr_SetString(PyExc_TypeError, "wrapper(): args must be a tuple");
        return NULL;
    }
    PyObject *handle = activate_any(self->redirect, self->code, 0);
    if (handle == NULL)
        return NULL;
    PyObject *result = PyObject_Call(wrapped, call_args,
                                     kwargs != Py_None && PyDict_Check(kwargs) ? kwargs : NULL);
    PyObject *failure = result == NULL ? fetch_exc() : NULL;
    PyObject *done = stop_any(handle);
    Py_DECREF(handle);
    if (done == NULL) {
        /* As a Python `finally:` that raises: the new error, the old one its context. */
        Py_XDECREF(result);
        if (failure != NULL) {
            PyObject *stop_error = fetch_exc();
            PyException_SetContext(stop_error, failure);
            raise_exc(stop_error);
        }
        return NULL;
    }
    Py_DECREF(done);
    if (failure != NULL) {
        raise_exc(failure);
        return NULL;
    }
    return result;
}

static PyObject *
wrapper_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    GuardObject *self = (GuardObject *)guard_new(type, args, kwds);
    if (self != NULL)
        self->vectorcall = (vectorcallfunc)wrapper_vectorcall;
    return (PyObject *)self;
}

PyTypeObject CallWrapperType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.CallWrapper",
    .tp_doc = "The wrapt wrapper of a decorated callable (see _decorate._PyCallWrapper).",
    .tp_basicsize = sizeof(GuardObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = wrapper_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GuardObject, vectorcall),
    .tp_traverse = (traverseproc)guard_traverse,
    .tp_clear = (inquiry)guard_clear,
    .tp_dealloc = (destructor)guard_dealloc,
};
