/* Pairing with-blocks with their handles: twin of _pairing (pair_enter,
 * push, pair_exit with _forget_node and _entered_by_helper). Keep in sync.
 * Runs under the registry lock, except pair_push (after it). */
#include "speedups.h"

#define SUSPENDABLE (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)

PyObject *
caller_frame(void)
{
    return (PyObject *)PyEval_GetFrame();
}

int
pair_enter(PyObject *handles, PyObject *handle, PyObject *frame)
{
    HandleObject *h = (HandleObject *)handle;
    set_field(&h->frame, frame);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++) {
        if (((HandleObject *)PyList_GET_ITEM(handles, i))->thread_id == h->thread_id) {
            h->pushed = 1;
            break;
        }
    }
    return PyList_Append(handles, handle);
}

int
pair_push(PyObject *handles, PyObject *handle)
{
    PyObject *top;
    if (PyContextVar_Get(cfg.with_stack, Py_None, &top) < 0)
        return -1;
    PyObject *node = PyTuple_Pack(3, handles, handle, top);
    Py_DECREF(top);
    if (node == NULL)
        return -1;
    PyObject *token = PyContextVar_Set(cfg.with_stack, node);
    Py_DECREF(node);
    Py_XDECREF(token);
    return token == NULL ? -1 : 0;
}

static int
contains(PyObject *list, PyObject *item)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++)
        if (PyList_GET_ITEM(list, i) == item)
            return 1;
    return 0;
}

static int
is_handle(PyObject *h)
{
    return IS_ACT(h) || PyObject_TypeCheck(h, &GroupHandleType);
}

static int
is_node(PyObject *node)
{
    return PyTuple_Check(node) && PyTuple_GET_SIZE(node) == 3;
}

/* Drop *handle*'s node from this context's with-stack, if it is there. */
int
forget_node(PyObject *handles, PyObject *handle)
{
    PyObject *node;
    if (PyContextVar_Get(cfg.with_stack, Py_None, &node) < 0)
        return -1;
    PyObject *skipped = PyList_New(0);
    if (skipped == NULL) {
        Py_DECREF(node);
        return -1;
    }
    while (is_node(node) &&
           !(PyTuple_GET_ITEM(node, 0) == handles && PyTuple_GET_ITEM(node, 1) == handle)) {
        if (PyList_Append(skipped, node) < 0)
            goto fail;
        PyObject *next = PyTuple_GET_ITEM(node, 2);
        Py_INCREF(next);
        Py_SETREF(node, next);
    }
    if (!is_node(node)) {
        Py_DECREF(node);
        Py_DECREF(skipped);
        return 0;
    }
    PyObject *rest = PyTuple_GET_ITEM(node, 2);
    Py_INCREF(rest);
    for (Py_ssize_t i = PyList_GET_SIZE(skipped) - 1; i >= 0; i--) {
        PyObject *other = PyList_GET_ITEM(skipped, i);
        PyObject *rebuilt = PyTuple_Pack(3, PyTuple_GET_ITEM(other, 0),
                                         PyTuple_GET_ITEM(other, 1), rest);
        Py_DECREF(rest);
        if (rebuilt == NULL)
            goto fail;
        rest = rebuilt;
    }
    PyObject *token = PyContextVar_Set(cfg.with_stack, rest);
    Py_DECREF(rest);
    Py_DECREF(node);
    Py_DECREF(skipped);
    Py_XDECREF(token);
    return token == NULL ? -1 : 0;
fail:
    Py_DECREF(node);
    Py_DECREF(skipped);
    return -1;
}

/* The newest handle entered from a frame that has returned (ExitStack and
 * the like), borrowed; NULL (no error) if none. */
static PyObject *
entered_by_helper(PyObject *handles, unsigned long me, int *failed)
{
    *failed = 0;
    PyObject *current_frames = PySys_GetObject("_current_frames"); /* borrowed */
    PyObject *frames = current_frames ? PyObject_CallNoArgs(current_frames) : NULL;
    PyObject *running = frames ? PySet_New(NULL) : NULL;
    if (running == NULL) {
        Py_XDECREF(frames);
        *failed = 1;
        return NULL;
    }
    Py_ssize_t pos = 0;
    PyObject *key, *top;
    while (PyDict_Next(frames, &pos, &key, &top)) {
        PyFrameObject *frame = (PyFrameObject *)top;
        Py_INCREF(frame);
        while (frame != NULL) {
            PyObject *id = PyLong_FromVoidPtr(frame);
            if (id == NULL || PySet_Add(running, id) < 0) {
                Py_XDECREF(id);
                Py_DECREF(frame);
                goto fail;
            }
            Py_DECREF(id);
            PyFrameObject *back = PyFrame_GetBack(frame);
            Py_DECREF(frame);
            frame = back;
        }
    }
    PyObject *newest = NULL, *newest_mine = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++) {
        HandleObject *h = (HandleObject *)PyList_GET_ITEM(handles, i);
        if (h->frame == Py_None)
            continue;
        PyObject *id = PyLong_FromVoidPtr(h->frame);
        int on_stack = id ? PySet_Contains(running, id) : -1;
        Py_XDECREF(id);
        if (on_stack < 0)
            goto fail;
        if (on_stack)
            continue;
        PyCodeObject *code = PyFrame_GetCode((PyFrameObject *)h->frame);
        int flags = code->co_flags;
        Py_DECREF(code);
        if (flags & SUSPENDABLE)
            continue;
        newest = (PyObject *)h;
        if (h->thread_id == me)
            newest_mine = (PyObject *)h;
    }
    Py_DECREF(frames);
    Py_DECREF(running);
    return newest_mine != NULL ? newest_mine : newest;
fail:
    Py_DECREF(frames);
    Py_DECREF(running);
    *failed = 1;
    return NULL;
}

PyObject *
pair_exit(PyObject *handles, PyObject *frame)
{
    Py_ssize_t n = PyList_GET_SIZE(handles);
    for (Py_ssize_t i = n - 1; i >= 0; i--) {
        HandleObject *h = (HandleObject *)PyList_GET_ITEM(handles, i);
        if (h->frame == frame) {
            Py_INCREF(h);
            if (PyList_SetSlice(handles, i, i + 1, NULL) < 0) {
                Py_DECREF(h);
                return NULL;
            }
            set_field(&h->frame, Py_None);
            if (h->pushed && forget_node(handles, (PyObject *)h) < 0) {
                Py_DECREF(h);
                return NULL;
            }
            return (PyObject *)h;
        }
    }
    PyObject *handle = NULL;
    unsigned long me = PyThread_get_thread_ident();
    PyObject *node;
    if (PyContextVar_Get(cfg.with_stack, Py_None, &node) < 0)
        return NULL;
    /* A node counts if it is this redirect's, live, and this thread's (a
     * context copied into another thread carries the parent's nodes). */
    while (is_node(node)) {
        PyObject *h = PyTuple_GET_ITEM(node, 1);
        if (PyTuple_GET_ITEM(node, 0) == handles && is_handle(h) &&
            ((HandleObject *)h)->thread_id == me && contains(handles, h))
            break;
        PyObject *next = PyTuple_GET_ITEM(node, 2);
        Py_INCREF(next);
        Py_SETREF(node, next);
    }
    if (is_node(node)) {
        handle = PyTuple_GET_ITEM(node, 1);
        Py_INCREF(handle);
        Py_DECREF(node);
        if (forget_node(handles, handle) < 0) {
            Py_DECREF(handle);
            return NULL;
        }
    }
    else {
        Py_DECREF(node);
    }
    if (handle == NULL && PyList_GET_SIZE(handles) == 1) {
        handle = PyList_GET_ITEM(handles, 0);
        Py_INCREF(handle);
    }
    if (handle == NULL) {
        int failed;
        handle = entered_by_helper(handles, me, &failed);
        if (failed)
            return NULL;
        Py_XINCREF(handle);
    }
    if (handle == NULL) {
        for (Py_ssize_t i = PyList_GET_SIZE(handles) - 1; i >= 0; i--) {
            HandleObject *h = (HandleObject *)PyList_GET_ITEM(handles, i);
            if (h->thread_id == me && !h->pushed) {
                handle = (PyObject *)h;
                Py_INCREF(handle);
                break;
            }
        }
    }
    if (handle == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "__exit__ without a matching __enter__ in this thread");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handles); i++) {
        if (PyList_GET_ITEM(handles, i) == handle) {
            if (PyList_SetSlice(handles, i, i + 1, NULL) < 0) {
                Py_DECREF(handle);
                return NULL;
            }
            break;
        }
    }
    set_field(&((HandleObject *)handle)->frame, Py_None);
    return handle;
}
