/* RLock: the registry lock, re-entrant like threading.RLock, which is its
 * Python twin. The C operations take it without a Python-level call; a wait
 * releases the GIL. */
#include "speedups.h"
#include <time.h>

/* Every taker holds the GIL (the extension is built for GIL builds only),
 * so the owner and count are read and changed by one thread at a time and
 * the uncontended case needs no operating-system lock at all. A thread that
 * finds the lock held by another waits in short sleeps without the GIL
 * until it is free: holders keep it for the length of one registry change.
 *
 * Interruptible: signal handlers run while waiting, and one that raises
 * gives up the wait (-1; used where nothing has changed yet). Otherwise
 * they run after the operation, when the interpreter next looks. */
static int
rlock_take(LockObject *self, int interruptible)
{
    unsigned long me = PyThread_get_thread_ident();
    if (self->count == 0) {
        self->owner = me;
        self->count = 1;
        return 0;
    }
    if (self->owner == me) {
        self->count++;
        return 0;
    }
    unsigned long pause = 1; /* microseconds, doubling up to a millisecond */
    while (self->count != 0) {
        Py_BEGIN_ALLOW_THREADS
        struct timespec ts = {0, (long)(pause * 1000)};
        nanosleep(&ts, NULL);
        Py_END_ALLOW_THREADS
        if (pause < 1000)
            pause *= 2;
        if (interruptible && PyErr_CheckSignals() < 0)
            return -1;
    }
    self->owner = me;
    self->count = 1;
    return 0;
}

static int
rlock_give(LockObject *self)
{
    if (self->count == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    if (--self->count == 0)
        self->owner = 0;
    return 0;
}

int
lock_take(int interruptible)
{
    return rlock_take((LockObject *)cfg.lock, interruptible);
}

void
lock_give(void)
{
    /* The operations only give back what they took. */
    (void)rlock_give((LockObject *)cfg.lock);
}

static PyObject *
rlock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "RLock() takes no arguments");
        return NULL;
    }
    return type->tp_alloc(type, 0);
}

static void
rlock_dealloc(LockObject *self)
{
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
rlock_acquire(LockObject *self, PyObject *unused)
{
    if (rlock_take(self, 1) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
rlock_release(LockObject *self, PyObject *unused)
{
    if (rlock_give(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
rlock_exit(LockObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return rlock_release(self, NULL);
}

static PyObject *
rlock_is_owned(LockObject *self, PyObject *unused)
{
    return PyBool_FromLong(self->count > 0 && self->owner == PyThread_get_thread_ident());
}

static PyObject *
rlock_recursion_count(LockObject *self, PyObject *unused)
{
    unsigned long mine = self->count > 0 && self->owner == PyThread_get_thread_ident();
    return PyLong_FromUnsignedLong(mine ? self->count : 0);
}

static PyMethodDef rlock_methods[] = {
    {"acquire", (PyCFunction)rlock_acquire, METH_NOARGS, "Take the lock (blocking); True."},
    {"release", (PyCFunction)rlock_release, METH_NOARGS, "Release the lock once."},
    {"__enter__", (PyCFunction)rlock_acquire, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))rlock_exit, METH_FASTCALL, NULL},
    {"_is_owned", (PyCFunction)rlock_is_owned, METH_NOARGS,
     "Whether the calling thread holds the lock."},
    {"_recursion_count", (PyCFunction)rlock_recursion_count, METH_NOARGS,
     "How many times the calling thread holds the lock (0: not at all)."},
    {NULL},
};

PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.RLock",
    .tp_doc = "A re-entrant lock like threading.RLock (acquire() always blocks).",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = rlock_new,
    .tp_dealloc = (destructor)rlock_dealloc,
    .tp_methods = rlock_methods,
};
