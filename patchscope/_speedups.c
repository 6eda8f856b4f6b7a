/* The registry's records, its fast paths and the reads other threads make, in C.
 *
 * Optional: patchscope/_records.py falls back to the same classes in Python
 * when this extension is not built (or PATCHSCOPE_PURE_PYTHON=1 is set), and
 * the two behave identically; the tests run against both.
 *
 * What is here:
 *   RLock: the registry lock, taken here without a Python-level call.
 *   ActivationBase, Entry, RedirectBase: the per-activation, per-attribute and
 *       per-redirect records as C structs, so that neither Python code nor the
 *       fast paths below pay for attribute dictionaries.
 *   RedirectBase._c_enter/_c_exit/_c_activate, enter_activation,
 *       exit_activation: `__enter__`/`__exit__`/`_activate` of
 *       single-attribute redirects and the registry's entry points, for the
 *       common cases (the first activation of an attribute, the last one
 *       ending, a with-block paired by its own frame). Every other case calls
 *       the Python implementation in _registry, which remains the reference;
 *       this code only takes the shortcuts it proves apply.
 *   ModuleSlot, ClassSlotBase: the descriptors of context-scope redirects of
 *       module and class attributes, whose __get__ runs on every read of the
 *       attribute from any thread.
 *   NewDispatcher: the __new__ of redirect_construction, for the calls that
 *       no activation applies to (other threads, say).
 *   preset_new, repair_new: the tp_new slot around deleting a class's
 *       __new__ (see _cpython.py).
 *
 * All registry state is read and changed under the registry's lock, exactly
 * as the Python code does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_GetBack before 3.11 */
#endif

/* ------------------------------------------------------------------------ */
/* state bound from _registry at import (see bind()) */

static PyObject *g_registry;      /* _registry's globals dict */
static PyObject *g_entries;       /* _entries */
static PyObject *g_swaps;         /* _module_swaps */
static PyObject *g_absent;        /* ABSENT */
static PyObject *g_enter_context; /* ExitStack.enter_context.__code__ */
static PyObject *g_activation;    /* the Activation class */
static PyObject *g_module_slot;   /* the _ModuleSlot class */
static PyObject *g_py_enter;      /* _enter_with */
static PyObject *g_py_exit;       /* _exit_with */
static PyObject *g_enter_locked;  /* _enter_locked */
static PyObject *g_pair_enter;    /* _pair_enter */
static PyObject *g_push_with;     /* _push_with */
static PyObject *g_pair_exit;     /* _pair_exit */
static PyObject *g_exit_locked;   /* _exit_locked */
static PyObject *g_after_exit;    /* _after_exit */


static PyObject *s_lock, *s_open, *s_value, *s_new, *s_prepare, *s_var;
static PyObject *empty_tuple;

/* The entry points below need what bind() provides. */
#define REQUIRE_BOUND(fail)                                                           \
    if (g_registry == NULL) {                                                         \
        PyErr_SetString(PyExc_RuntimeError,                                           \
                        "patchscope._speedups works only through patchscope._registry"); \
        return fail;                                                                  \
    }

#define OWN 0
#define SHADOW 1
#define SETATTR 2

/* ------------------------------------------------------------------------ */
/* RLock: the registry lock */

/* A re-entrant lock, as threading.RLock, that the fast path takes without a
 * Python-level call. Waiting releases the GIL. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    unsigned long owner;
    unsigned long count;
} LockObject;

static PyTypeObject LockType;

/* Take the lock. *interruptible*: signal handlers run while waiting, and
 * one that raises gives up the wait (entering); otherwise they run after
 * (ending an activation must not stop half way). */
static int
rlock_enter(LockObject *self, int interruptible)
{
    unsigned long me = PyThread_get_thread_ident();
    if (self->count > 0 && self->owner == me) {
        self->count++;
        return 0;
    }
    if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
        /* Wait without the GIL; run signal handlers (Ctrl-C) as threading's locks do. */
        PyLockStatus status;
        do {
            Py_BEGIN_ALLOW_THREADS
            status = PyThread_acquire_lock_timed(self->lock, -1, interruptible);
            Py_END_ALLOW_THREADS
            if (status == PY_LOCK_INTR && Py_MakePendingCalls() < 0)
                return -1;
        } while (status == PY_LOCK_INTR);
        if (status != PY_LOCK_ACQUIRED) {
            PyErr_SetString(PyExc_RuntimeError, "patchscope: cannot take the registry lock");
            return -1;
        }
    }
    self->owner = me;
    self->count = 1;
    return 0;
}

static int
rlock_exit(LockObject *self)
{
    if (self->count == 0 || self->owner != PyThread_get_thread_ident()) {
        PyErr_SetString(PyExc_RuntimeError, "cannot release un-acquired lock");
        return -1;
    }
    if (--self->count == 0) {
        self->owner = 0;
        PyThread_release_lock(self->lock);
    }
    return 0;
}

static PyObject *
rlock_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "RLock() takes no arguments");
        return NULL;
    }
    LockObject *self = (LockObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate a lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void
rlock_dealloc(LockObject *self)
{
    if (self->lock != NULL) {
        if (self->count > 0)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
rlock_acquire(LockObject *self, PyObject *unused)
{
    if (rlock_enter(self, 1) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
rlock_release(LockObject *self, PyObject *unused)
{
    if (rlock_exit(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
rlock_exit_method(LockObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return rlock_release(self, NULL);
}

static PyObject *
rlock_is_owned(LockObject *self, PyObject *unused)
{
    return PyBool_FromLong(self->count > 0 && self->owner == PyThread_get_thread_ident());
}

static PyMethodDef rlock_methods[] = {
    {"acquire", (PyCFunction)rlock_acquire, METH_NOARGS, "Take the lock (blocking); True."},
    {"release", (PyCFunction)rlock_release, METH_NOARGS, "Release the lock once."},
    {"__enter__", (PyCFunction)rlock_acquire, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))rlock_exit_method, METH_FASTCALL, NULL},
    {"_is_owned", (PyCFunction)rlock_is_owned, METH_NOARGS,
     "Whether the calling thread holds the lock."},
    {NULL},
};

static PyTypeObject LockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.RLock",
    .tp_doc = "A re-entrant lock like threading.RLock (acquire() always blocks).",
    .tp_basicsize = sizeof(LockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = rlock_new,
    .tp_dealloc = (destructor)rlock_dealloc,
    .tp_methods = rlock_methods,
};

/* ------------------------------------------------------------------------ */
/* The records' attributes may be set but not deleted: the fast path reads
 * their fields without checking for NULL. */

static int
refuse_delete(PyObject *self, PyObject *name, PyObject *value)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "cannot delete attribute %R of %s", name,
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    return PyObject_GenericSetAttr(self, name, value);
}

/* ------------------------------------------------------------------------ */
/* ActivationBase */

typedef struct {
    PyObject_HEAD
    PyObject *redirect, *value, *code, *lasti, *thread_id;
    PyObject *entry, *slot, *spec, *frame;
    PyObject *weakrefs;
    char open, ctx, pushed;
} ActObject;

static PyTypeObject ActType;

static PyObject *
act_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    ActObject *self = (ActObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    PyObject **fields[] = {&self->redirect, &self->value, &self->code, &self->lasti,
                           &self->thread_id, &self->entry, &self->slot, &self->spec,
                           &self->frame};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        Py_INCREF(Py_None);
        *fields[i] = Py_None;
    }
    self->open = 1;
    return (PyObject *)self;
}

static int
act_init(ActObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *redirect, *value, *code, *lasti;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Activation() takes no keyword arguments");
        return -1;
    }
    if (!PyArg_UnpackTuple(args, "Activation", 4, 4, &redirect, &value, &code, &lasti))
        return -1;
    PyObject *ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (ident == NULL)
        return -1;
    Py_INCREF(redirect);
    Py_INCREF(value);
    Py_INCREF(code);
    Py_INCREF(lasti);
    Py_SETREF(self->redirect, redirect);
    Py_SETREF(self->value, value);
    Py_SETREF(self->code, code);
    Py_SETREF(self->lasti, lasti);
    Py_SETREF(self->thread_id, ident);
    return 0;
}

static int
act_traverse(ActObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->redirect);
    Py_VISIT(self->value);
    Py_VISIT(self->code);
    Py_VISIT(self->entry);
    Py_VISIT(self->slot);
    Py_VISIT(self->spec);
    Py_VISIT(self->frame);
    return 0;
}

static int
act_clear(ActObject *self)
{
    Py_CLEAR(self->redirect);
    Py_CLEAR(self->value);
    Py_CLEAR(self->code);
    Py_CLEAR(self->lasti);
    Py_CLEAR(self->thread_id);
    Py_CLEAR(self->entry);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->spec);
    Py_CLEAR(self->frame);
    return 0;
}

static void
act_dealloc(ActObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    act_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef act_members[] = {
    {"_redirect", T_OBJECT, offsetof(ActObject, redirect), 0, NULL},
    {"_value", T_OBJECT, offsetof(ActObject, value), 0, NULL},
    {"_code", T_OBJECT, offsetof(ActObject, code), 0, NULL},
    {"_lasti", T_OBJECT, offsetof(ActObject, lasti), 0, NULL},
    {"thread_id", T_OBJECT, offsetof(ActObject, thread_id), READONLY,
     "Identifier of the thread that entered this activation."},
    {"_entry", T_OBJECT, offsetof(ActObject, entry), 0, NULL},
    {"_slot", T_OBJECT, offsetof(ActObject, slot), 0, NULL},
    {"_spec", T_OBJECT, offsetof(ActObject, spec), 0, NULL},
    {"_frame", T_OBJECT, offsetof(ActObject, frame), 0, NULL},
    {"open", T_BOOL, offsetof(ActObject, open), 0,
     "True until the activation ends."},
    {"_ctx", T_BOOL, offsetof(ActObject, ctx), 0, NULL},
    {"_pushed", T_BOOL, offsetof(ActObject, pushed), 0, NULL},
    {NULL},
};

static PyTypeObject ActType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.ActivationBase",
    .tp_basicsize = sizeof(ActObject),
    .tp_weaklistoffset = offsetof(ActObject, weakrefs),
    .tp_setattro = refuse_delete,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = act_new,
    .tp_init = (initproc)act_init,
    .tp_traverse = (traverseproc)act_traverse,
    .tp_clear = (inquiry)act_clear,
    .tp_dealloc = (destructor)act_dealloc,
    .tp_members = act_members,
};

/* ------------------------------------------------------------------------ */
/* Entry */

typedef struct {
    PyObject_HEAD
    PyObject *target, *name, *key, *original, *stack, *slot, *installed, *parked;
    int kind;
    Py_ssize_t n_context;
    char written;
} EntryObject;

static PyTypeObject EntryType;

static PyObject *
entry_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *target, *name, *original;
    int kind;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "_Entry() takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OUiO:_Entry", &target, &name, &kind, &original))
        return NULL;
    EntryObject *self = (EntryObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    PyObject *id = PyLong_FromVoidPtr(target);
    self->key = id ? PyTuple_Pack(2, id, name) : NULL;
    Py_XDECREF(id);
    self->stack = PyList_New(0);
    if (self->key == NULL || self->stack == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(target);
    self->target = target;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(original);
    self->original = original;
    Py_INCREF(Py_None);
    self->slot = Py_None;
    Py_INCREF(Py_None);
    self->parked = Py_None;
    self->installed = g_absent ? g_absent : Py_None;
    Py_INCREF(self->installed);
    self->kind = kind;
    return (PyObject *)self;
}

static int
entry_traverse(EntryObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->target);
    Py_VISIT(self->original);
    Py_VISIT(self->stack);
    Py_VISIT(self->slot);
    Py_VISIT(self->installed);
    Py_VISIT(self->parked);
    return 0;
}

static int
entry_clear(EntryObject *self)
{
    Py_CLEAR(self->target);
    Py_CLEAR(self->name);
    Py_CLEAR(self->key);
    Py_CLEAR(self->original);
    Py_CLEAR(self->stack);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->installed);
    Py_CLEAR(self->parked);
    return 0;
}

static void
entry_dealloc(EntryObject *self)
{
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef entry_members[] = {
    {"target", T_OBJECT, offsetof(EntryObject, target), READONLY, NULL},
    {"name", T_OBJECT, offsetof(EntryObject, name), READONLY, NULL},
    {"key", T_OBJECT, offsetof(EntryObject, key), READONLY, NULL},
    {"original", T_OBJECT, offsetof(EntryObject, original), 0, NULL},
    {"stack", T_OBJECT, offsetof(EntryObject, stack), READONLY, NULL},
    {"slot", T_OBJECT, offsetof(EntryObject, slot), 0, NULL},
    {"installed", T_OBJECT, offsetof(EntryObject, installed), 0, NULL},
    {"parked", T_OBJECT, offsetof(EntryObject, parked), 0, NULL},
    {"kind", T_INT, offsetof(EntryObject, kind), 0, NULL},
    {"n_context", T_PYSSIZET, offsetof(EntryObject, n_context), 0, NULL},
    {"written", T_BOOL, offsetof(EntryObject, written), 0, NULL},
    {NULL},
};

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.Entry",
    .tp_basicsize = sizeof(EntryObject),
    .tp_setattro = refuse_delete,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = entry_new,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_members = entry_members,
};

/* ------------------------------------------------------------------------ */
/* ModuleSlot */

typedef struct {
    PyObject_HEAD
    PyObject *dict, *name, *var;
} SlotObject;

static PyObject *
slot_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *module, *name;
    if (!PyArg_ParseTuple(args, "O!U:_ModuleSlot", &PyModule_Type, &module, &name))
        return NULL;
    PyObject *modname = PyModule_GetNameObject(module);
    if (modname == NULL)
        return NULL;
    PyObject *label = PyUnicode_FromFormat("patchscope:%U.%U", modname, name);
    Py_DECREF(modname);
    if (label == NULL)
        return NULL;
    const char *text = PyUnicode_AsUTF8(label);
    PyObject *var = text ? PyContextVar_New(text, empty_tuple) : NULL;
    Py_DECREF(label);
    if (var == NULL)
        return NULL;
    SlotObject *self = (SlotObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(var);
        return NULL;
    }
    self->dict = PyModule_GetDict(module);
    Py_INCREF(self->dict);
    Py_INCREF(name);
    self->name = name;
    self->var = var;
    return (PyObject *)self;
}

static int
slot_traverse(SlotObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->var);
    return 0;
}

static int
slot_clear(SlotObject *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->name);
    Py_CLEAR(self->var);
    return 0;
}

static void
slot_dealloc(SlotObject *self)
{
    PyObject_GC_UnTrack(self);
    slot_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The value of this context's innermost open activation in *acts*, a new
 * reference; NULL without an error when there is none. */
static PyObject *
innermost_open(PyObject *acts)
{
    for (Py_ssize_t i = PyTuple_GET_SIZE(acts) - 1; i >= 0; i--) {
        PyObject *act = PyTuple_GET_ITEM(acts, i);
        if (PyObject_TypeCheck(act, &ActType)) {
            if (((ActObject *)act)->open) {
                Py_INCREF(((ActObject *)act)->value);
                return ((ActObject *)act)->value;
            }
            continue;
        }
        PyObject *open = PyObject_GetAttr(act, s_open);
        if (open == NULL)
            return NULL;
        int is_open = PyObject_IsTrue(open);
        Py_DECREF(open);
        if (is_open < 0)
            return NULL;
        if (is_open)
            return PyObject_GetAttr(act, s_value);
    }
    return NULL;
}

static PyObject *
slot_get(SlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *acts;
    if (PyContextVar_Get(self->var, NULL, &acts) < 0)
        return NULL;
    if (acts != NULL && PyTuple_Check(acts) && PyTuple_GET_SIZE(acts)) {
        PyObject *value = innermost_open(acts);
        Py_DECREF(acts);
        if (value != NULL || PyErr_Occurred())
            return value;
    }
    else {
        Py_XDECREF(acts);
    }
    PyObject *value = PyDict_GetItemWithError(self->dict, self->name);
    if (value != NULL) {
        Py_INCREF(value);
        return value;
    }
    if (!PyErr_Occurred())
        /* The module then reports it as usual, or calls its __getattr__. */
        PyErr_SetObject(PyExc_AttributeError, self->name);
    return NULL;
}

static int
slot_set(SlotObject *self, PyObject *instance, PyObject *value)
{
    if (value != NULL)
        return PyDict_SetItem(self->dict, self->name, value);
    if (PyDict_DelItem(self->dict, self->name) < 0) {
        if (PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            PyErr_SetObject(PyExc_AttributeError, self->name);
        }
        return -1;
    }
    return 0;
}

static PyMemberDef slot_members[] = {
    {"dict", T_OBJECT, offsetof(SlotObject, dict), READONLY, NULL},
    {"name", T_OBJECT, offsetof(SlotObject, name), READONLY, NULL},
    {"var", T_OBJECT, offsetof(SlotObject, var), READONLY, NULL},
    {NULL},
};

static PyTypeObject SlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.ModuleSlot",
    .tp_doc = "Data descriptor on a module's private subclass; the value stays in its dict.",
    .tp_basicsize = sizeof(SlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = slot_new,
    .tp_traverse = (traverseproc)slot_traverse,
    .tp_clear = (inquiry)slot_clear,
    .tp_dealloc = (destructor)slot_dealloc,
    .tp_members = slot_members,
    .tp_descr_get = (descrgetfunc)slot_get,
    .tp_descr_set = (descrsetfunc)slot_set,
};

/* ------------------------------------------------------------------------ */
/* ClassSlotBase: the non-data descriptor of context-scope class redirects */

typedef struct {
    PyObject_HEAD
    PyObject *cls_ref, *fallback, *name, *var;
} ClassSlotObject;

static PyObject *s_inherited, *s_qualname;

static PyObject *
cslot_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cls, *name;
    if (!PyArg_ParseTuple(args, "O!U:_ClassSlot", &PyType_Type, &cls, &name))
        return NULL;
    PyObject *qualname = PyObject_GetAttr(cls, s_qualname);
    if (qualname == NULL)
        return NULL;
    PyObject *label = PyUnicode_FromFormat("patchscope:%S.%U", qualname, name);
    Py_DECREF(qualname);
    if (label == NULL)
        return NULL;
    const char *text = PyUnicode_AsUTF8(label);
    PyObject *var = text ? PyContextVar_New(text, empty_tuple) : NULL;
    Py_DECREF(label);
    /* Weak: the class may die; its slots die with it. */
    PyObject *ref = var ? PyWeakref_NewRef(cls, NULL) : NULL;
    ClassSlotObject *self = ref ? (ClassSlotObject *)type->tp_alloc(type, 0) : NULL;
    if (self == NULL) {
        Py_XDECREF(var);
        Py_XDECREF(ref);
        return NULL;
    }
    self->cls_ref = ref;
    Py_INCREF(name);
    self->name = name;
    self->var = var;
    self->fallback = g_absent ? g_absent : Py_None;
    Py_INCREF(self->fallback);
    return (PyObject *)self;
}

static int
cslot_traverse(ClassSlotObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cls_ref);
    Py_VISIT(self->fallback);
    Py_VISIT(self->var);
    return 0;
}

static int
cslot_clear(ClassSlotObject *self)
{
    Py_CLEAR(self->cls_ref);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->name);
    Py_CLEAR(self->var);
    return 0;
}

static void
cslot_dealloc(ClassSlotObject *self)
{
    PyObject_GC_UnTrack(self);
    cslot_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* This context's replacement, else the process value (fallback), else what
 * the class inherits; bound as that raw value would bind. */
static PyObject *
cslot_get(ClassSlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *acts, *value = NULL;
    if (PyContextVar_Get(self->var, NULL, &acts) < 0)
        return NULL;
    if (acts != NULL && PyTuple_Check(acts) && PyTuple_GET_SIZE(acts)) {
        value = innermost_open(acts);
        if (value == NULL && PyErr_Occurred()) {
            Py_DECREF(acts);
            return NULL;
        }
    }
    Py_XDECREF(acts);
    if (value == NULL) {
        value = self->fallback;
        Py_INCREF(value);
    }
    if (value == g_absent) {
        /* What the class inherits (or its metaclass has), already bound. */
        Py_DECREF(value);
        return PyObject_CallMethodObjArgs((PyObject *)self, s_inherited,
                                          instance ? instance : Py_None,
                                          owner ? owner : Py_None, NULL);
    }
    descrgetfunc get = Py_TYPE(value)->tp_descr_get;
    if (get == NULL)
        return value;
    PyObject *bound = get(value, instance, owner);
    Py_DECREF(value);
    return bound;
}

static PyMemberDef cslot_members[] = {
    {"cls_ref", T_OBJECT, offsetof(ClassSlotObject, cls_ref), READONLY, NULL},
    {"fallback", T_OBJECT, offsetof(ClassSlotObject, fallback), 0, NULL},
    {"name", T_OBJECT, offsetof(ClassSlotObject, name), READONLY, NULL},
    {"var", T_OBJECT, offsetof(ClassSlotObject, var), READONLY, NULL},
    {NULL},
};

static PyTypeObject ClassSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.ClassSlotBase",
    .tp_doc = "Non-data descriptor in a class's __dict__ (see _registry._ClassSlot).",
    .tp_basicsize = sizeof(ClassSlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = cslot_new,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)cslot_traverse,
    .tp_clear = (inquiry)cslot_clear,
    .tp_dealloc = (destructor)cslot_dealloc,
    .tp_members = cslot_members,
    .tp_descr_get = (descrgetfunc)cslot_get,
};

/* The context variable of a slot (a ModuleSlot, or a construction's
 * dispatcher): a new reference. */
static PyObject *
slot_var(PyObject *slot)
{
    if (Py_IS_TYPE(slot, &SlotType)) {
        Py_INCREF(((SlotObject *)slot)->var);
        return ((SlotObject *)slot)->var;
    }
    return PyObject_GetAttr(slot, s_var);
}

/* Give *module* the class *to*: a private subclass of its own class with no
 * fields of its own, or that class back. The pair was checked by a Python
 * `module.__class__ = sub` when the subclass was first installed, so this
 * only swaps the type as object.__class__'s setter does after its checks. */
static void
swap_module_class(PyObject *module, PyTypeObject *to)
{
    PyTypeObject *from = Py_TYPE(module);
    if (to->tp_flags & Py_TPFLAGS_HEAPTYPE)
        Py_INCREF(to);
    Py_SET_TYPE(module, to);
    if (from->tp_flags & Py_TPFLAGS_HEAPTYPE)
        Py_DECREF(from);
}

/* Whether *sub* is a private subclass that *base* and it can swap. */
static int
swappable(PyTypeObject *base, PyObject *sub)
{
    return PyType_Check(sub) && ((PyTypeObject *)sub)->tp_base == base &&
           ((PyTypeObject *)sub)->tp_basicsize == base->tp_basicsize &&
           ((PyTypeObject *)sub)->tp_dictoffset == base->tp_dictoffset &&
           ((PyTypeObject *)sub)->tp_weaklistoffset == base->tp_weaklistoffset &&
           PyType_IsSubtype(base, &PyModule_Type);
}

/* ------------------------------------------------------------------------ */
/* RedirectBase and the with fast path */

static PyTypeObject RedirectType;

typedef struct {
    PyObject_HEAD
    PyObject *handles, *key, *target, *value, *spare, *spec, *replacement, *name, *scope;
    PyObject *slot, *base;
    char ctx, plain, create;
} RedirectObject;

static PyObject *
redirect_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    RedirectObject *self = (RedirectObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->handles = PyList_New(0);
    if (self->handles == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject **fields[] = {&self->key,  &self->target,      &self->value, &self->spare,
                           &self->spec, &self->replacement, &self->name,  &self->scope,
                           &self->slot, &self->base};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        Py_INCREF(Py_None);
        *fields[i] = Py_None;
    }
    return (PyObject *)self;
}

static int
redirect_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    return 0; /* subclasses set their fields in their own __init__ */
}

static int
redirect_traverse(RedirectObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->handles);
    Py_VISIT(self->target);
    Py_VISIT(self->value);
    Py_VISIT(self->spare);
    Py_VISIT(self->spec);
    Py_VISIT(self->replacement);
    Py_VISIT(self->slot);
    Py_VISIT(self->base);
    return 0;
}

static int
redirect_clear(RedirectObject *self)
{
    Py_CLEAR(self->handles);
    Py_CLEAR(self->key);
    Py_CLEAR(self->target);
    Py_CLEAR(self->value);
    Py_CLEAR(self->spare);
    Py_CLEAR(self->spec);
    Py_CLEAR(self->replacement);
    Py_CLEAR(self->name);
    Py_CLEAR(self->scope);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->base);
    return 0;
}

static void
redirect_dealloc(RedirectObject *self)
{
    PyObject_GC_UnTrack(self);
    redirect_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Take the registry lock (re-created in forked children, so looked up each
 * time): the RLock above, or any object with acquire() and release().
 * Returns a new reference to the lock taken, for lock_release. */
static PyObject *
lock_acquire(int interruptible)
{
    PyObject *lock = PyDict_GetItemWithError(g_registry, s_lock);
    if (lock == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "patchscope registry lock missing");
        return NULL;
    }
    Py_INCREF(lock);
    if (Py_IS_TYPE(lock, &LockType)) {
        if (rlock_enter((LockObject *)lock, interruptible) == 0)
            return lock;
    }
    else {
        PyObject *ok = PyObject_CallMethod(lock, "acquire", NULL);
        if (ok != NULL) {
            Py_DECREF(ok);
            return lock;
        }
    }
    Py_DECREF(lock);
    return NULL;
}

/* Release *lock* and drop the reference, keeping any pending exception:
 * returns -1 if one is pending or the release failed. */
static int
lock_release(PyObject *lock)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int failed;
    if (Py_IS_TYPE(lock, &LockType)) {
        failed = rlock_exit((LockObject *)lock) < 0;
    }
    else {
        PyObject *ok = PyObject_CallMethod(lock, "release", NULL);
        failed = ok == NULL;
        Py_XDECREF(ok);
    }
    Py_DECREF(lock);
    if (failed) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(type, value, tb);
    return type == NULL ? 0 : -1;
}

static PyObject *
target_dict(PyObject *target)
{
    if (PyModule_Check(target)) /* also while context slots give it a private subclass */
        return PyModule_GetDict(target);
    if (PyType_CheckExact(target) &&
        PyType_HasFeature((PyTypeObject *)target, Py_TPFLAGS_HEAPTYPE))
        return ((PyTypeObject *)target)->tp_dict;
    return NULL;
}

static PyObject *
call4(PyObject *func, PyObject *a, PyObject *b, PyObject *c, PyObject *d)
{
    PyObject *args[] = {a, b, c, d};
    return PyObject_Vectorcall(func, args, 4, NULL);
}

static int delete_new(PyTypeObject *cls);
static PyObject *subclasses_of(PyTypeObject *type);
static int enter_first_with(RedirectObject *r, PyObject *target, ActObject *act,
                            EntryObject *entry);

/* The first activation of (target, name), from the redirect's recycled entry.
 * Returns 1 if done, 0 if the general path must do it (nothing changed), -1
 * on error (nothing changed). Called under the lock. */
static int
enter_first(RedirectObject *r, PyObject *target, ActObject *act)
{
    if (!PyObject_TypeCheck(r->spare, &EntryType))
        return 0;
    EntryObject *entry = (EntryObject *)r->spare;
    PyObject *dict = target_dict(target);
    if (dict == NULL || entry->target != target)
        return 0;
    PyObject *raw = PyDict_GetItemWithError(dict, r->name);
    if (raw == NULL && PyErr_Occurred())
        return -1;
    int kind;
    if (raw != NULL)
        kind = OWN;
    else if (PyUnicode_Check(r->name) && PyUnicode_Compare(r->name, s_new) == 0)
        kind = SHADOW; /* a class's __new__ always resolves: it is inherited */
    else
        return 0;
    /* Complete the entry before anything publishes it, and drop what it held
     * only at the end: that may run a finalizer, which may use the registry. */
    PyObject *previous = entry->original;
    Py_INCREF(raw != NULL ? raw : g_absent);
    entry->original = raw != NULL ? raw : g_absent;
    entry->kind = kind;
    Py_INCREF(entry);
    int done = enter_first_with(r, target, act, entry);
    Py_DECREF(entry);
    Py_DECREF(previous);
    return done;
}

static int
enter_first_with(RedirectObject *r, PyObject *target, ActObject *act, EntryObject *entry)
{
    if (act->ctx) {
        /* A module's class and slot from last time, if they still fit: the
         * module has its own class, or the same private subclass because
         * other names of it are redirected, and the slot is still there. */
        PyObject *parked = entry->parked;
        if (entry->kind != OWN || !PyTuple_Check(parked) || PyTuple_GET_SIZE(parked) != 3)
            return 0;
        PyObject *base = PyTuple_GET_ITEM(parked, 0), *sub = PyTuple_GET_ITEM(parked, 1);
        PyObject *slot = PyTuple_GET_ITEM(parked, 2);
        PyObject *now = (PyObject *)Py_TYPE(target);
        if ((now != base && now != sub) || !PyType_Check(base) ||
            !swappable((PyTypeObject *)base, sub) ||
            PyDict_GetItemWithError(((PyTypeObject *)sub)->tp_dict, r->name) != slot)
            return PyErr_Occurred() ? -1 : 0;
        PyObject *id = PyTuple_GET_ITEM(entry->key, 0); /* id(target) */
        Py_INCREF(id);
        PyObject *swap = PyDict_GetItemWithError(g_swaps, id); /* borrowed */
        if (swap == NULL && PyErr_Occurred()) {
            Py_DECREF(id);
            return -1;
        }
        if (now == sub) {
            /* Swapped already: count one more slot on it. */
            long count = swap != NULL && PyList_Check(swap) && PyList_GET_SIZE(swap) == 3 &&
                                 PyList_GET_ITEM(swap, 1) == sub
                             ? PyLong_AsLong(PyList_GET_ITEM(swap, 2))
                             : -1;
            PyObject *more = count > 0 ? PyLong_FromLong(count + 1) : NULL;
            if (more == NULL || PyList_Append(entry->stack, (PyObject *)act) < 0) {
                Py_XDECREF(more);
                Py_DECREF(id);
                return PyErr_Occurred() ? -1 : 0;
            }
            PyList_SetItem(swap, 2, more);
            Py_DECREF(id);
        }
        else {
            if (swap != NULL) {
                Py_DECREF(id);
                return 0;
            }
            PyObject *one = PyLong_FromLong(1);
            PyObject *fresh = one ? PyList_New(3) : NULL;
            if (fresh == NULL) {
                Py_XDECREF(one);
                Py_DECREF(id);
                return -1;
            }
            Py_INCREF(base);
            PyList_SET_ITEM(fresh, 0, base);
            Py_INCREF(sub);
            PyList_SET_ITEM(fresh, 1, sub);
            PyList_SET_ITEM(fresh, 2, one);
            if (PyList_Append(entry->stack, (PyObject *)act) < 0 ||
                PyDict_SetItem(g_swaps, id, fresh) < 0) {
                PyList_SetSlice(entry->stack, 0, PY_SSIZE_T_MAX, NULL);
                Py_DECREF(fresh);
                Py_DECREF(id);
                return -1;
            }
            Py_DECREF(fresh);
            Py_DECREF(id);
            swap_module_class(target, (PyTypeObject *)sub);
        }
        Py_INCREF(slot);
        Py_SETREF(entry->slot, slot);
        Py_INCREF(slot);
        Py_SETREF(act->slot, slot);
        entry->n_context = 1;
    }
    else {
        if (PyList_Append(entry->stack, (PyObject *)act) < 0)
            return -1;
        if (PyObject_SetAttr(target, r->name, act->value) < 0) {
            PyList_SetSlice(entry->stack, 0, PY_SSIZE_T_MAX, NULL);
            if (!PyErr_ExceptionMatches(PyExc_Exception))
                return -1; /* KeyboardInterrupt and the like */
            PyErr_Clear();
            return 0; /* the general path reports it */
        }
        Py_INCREF(act->value);
        Py_SETREF(entry->installed, act->value);
        entry->written = 1;
    }
    if (PyDict_SetItem(g_entries, entry->key, (PyObject *)entry) < 0) {
        /* Cannot happen for a tuple key short of memory; report it. */
        return -1;
    }
    Py_INCREF(entry);
    Py_SETREF(act->entry, (PyObject *)entry);
    Py_INCREF(Py_None);
    Py_SETREF(r->spare, Py_None); /* the registry and the activation hold it now */
    return 1;
}

static int push_onto(PyObject *var, ActObject *act);

/* Push *act* onto its slot's context variable (after the lock). */
static int
push_context(ActObject *act)
{
    PyObject *var = slot_var(act->slot);
    if (var == NULL)
        return -1;
    int done = push_onto(var, act);
    Py_DECREF(var);
    return done;
}

static int
push_onto(PyObject *var, ActObject *act)
{
    PyObject *acts;
    if (PyContextVar_Get(var, empty_tuple, &acts) < 0)
        return -1;
    Py_ssize_t n = PyTuple_Check(acts) ? PyTuple_GET_SIZE(acts) : 0;
    PyObject *fresh = PyTuple_New(n + 1);
    if (fresh == NULL) {
        Py_DECREF(acts);
        return -1;
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *other = PyTuple_GET_ITEM(acts, i);
        int open;
        if (PyObject_TypeCheck(other, &ActType))
            open = ((ActObject *)other)->open;
        else {
            PyObject *o = PyObject_GetAttr(other, s_open);
            open = o ? PyObject_IsTrue(o) : -1;
            Py_XDECREF(o);
            if (open < 0) {
                Py_DECREF(acts);
                Py_DECREF(fresh);
                return -1;
            }
        }
        if (open) {
            Py_INCREF(other);
            PyTuple_SET_ITEM(fresh, kept++, other);
        }
    }
    Py_DECREF(acts);
    Py_INCREF(act);
    PyTuple_SET_ITEM(fresh, kept++, (PyObject *)act);
    if (kept != n + 1 && _PyTuple_Resize(&fresh, kept) < 0)
        return -1;
    PyObject *token = PyContextVar_Set(var, fresh);
    Py_DECREF(fresh);
    if (token == NULL)
        return -1;
    Py_DECREF(token);
    return 0;
}

/* Register *act* on (target, name) and make it visible; under the lock.
 * All-or-nothing, like _registry._enter_locked, which does what this does not. */
static int
enter_locked(RedirectObject *r, PyObject *target, PyObject *key, ActObject *act)
{
    PyObject *entry = PyDict_GetItemWithError(g_entries, key);
    int done = 0;
    if (entry == NULL && !PyErr_Occurred())
        done = enter_first(r, target, act);
    if (done < 0 || PyErr_Occurred())
        return -1;
    if (!done) {
        PyObject *res = call4(g_enter_locked, (PyObject *)r, target, key, (PyObject *)act);
        if (res == NULL)
            return -1;
        Py_DECREF(res);
    }
    return 0;
}

/* _registry.enter_activation: register *act*, then push it in this context. */
static PyObject *
enter_activation(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    REQUIRE_BOUND(NULL)
    if (nargs != 3 || !PyObject_TypeCheck(args[0], &RedirectType) ||
        !PyObject_TypeCheck(args[2], &ActType)) {
        PyErr_SetString(PyExc_TypeError, "enter_activation(redirect, target, activation)");
        return NULL;
    }
    RedirectObject *r = (RedirectObject *)args[0];
    PyObject *target = args[1];
    ActObject *act = (ActObject *)args[2];
    PyObject *key;
    if (r->key != Py_None && r->target == target) {
        Py_INCREF(r->key);
        key = r->key;
    }
    else {
        PyObject *id = PyLong_FromVoidPtr(target);
        key = id ? PyTuple_Pack(2, id, r->name) : NULL;
        Py_XDECREF(id);
        if (key == NULL)
            return NULL;
    }
    PyObject *lock = lock_acquire(1);
    if (lock == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    int failed = enter_locked(r, target, key, act) < 0;
    Py_DECREF(key);
    if (lock_release(lock) < 0 || failed)
        return NULL;
    if (act->slot != Py_None && push_context(act) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* What ConstructionRedirect._prepare does: refresh the __new__ the class
 * inherits (r->base[0]) and tag *act* with what it builds and, in context
 * scope, the dispatcher it is pushed onto. */
static int
prepare(RedirectObject *r, ActObject *act)
{
    if (PyList_Check(r->base) && PyList_GET_SIZE(r->base) == 1 && PyType_Check(r->target)) {
        PyObject *mro = ((PyTypeObject *)r->target)->tp_mro;
        for (Py_ssize_t i = 1; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
            PyTypeObject *klass = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
#if PY_VERSION_HEX >= 0x030C0000
            PyObject *dict = PyType_GetDict(klass); /* tp_dict is NULL for builtins */
            PyObject *raw = dict ? PyDict_GetItemWithError(dict, s_new) : NULL;
            Py_XDECREF(dict); /* the type keeps it alive, and raw with it */
#else
            PyObject *dict = klass->tp_dict;
            PyObject *raw = dict ? PyDict_GetItemWithError(dict, s_new) : NULL;
#endif
            if (raw == NULL) {
                if (PyErr_Occurred())
                    return -1;
                continue;
            }
            if (PyObject_TypeCheck(raw, &PyStaticMethod_Type)) {
                PyObject *func = PyObject_GetAttrString(raw, "__func__");
                if (func == NULL)
                    return -1;
                PyList_SetItem(r->base, 0, func);
            }
            else {
                Py_INCREF(raw);
                PyList_SetItem(r->base, 0, raw);
            }
            break;
        }
    }
    else {
        PyObject *done = PyObject_CallMethodOneArg((PyObject *)r, s_prepare, (PyObject *)act);
        if (done == NULL)
            return -1;
        Py_DECREF(done);
        return 0;
    }
    Py_INCREF(r->spec);
    Py_SETREF(act->spec, r->spec);
    Py_INCREF(r->slot);
    Py_SETREF(act->slot, r->slot);
    return 0;
}

static PyObject *g_py_activate; /* _activate */
static PyObject *end_locked(ActObject *act, PyObject *lock);

/* _registry._activate for a redirect of a fixed target: a new activation,
 * prepared by the redirect if it prepares them, registered and pushed. */
static PyObject *
redirect_c_activate(RedirectObject *r, PyObject *const *args, Py_ssize_t nargs)
{
    REQUIRE_BOUND(NULL)
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_c_activate(code, lasti)");
        return NULL;
    }
    if (r->key == Py_None) {
        PyObject *call[] = {(PyObject *)r, args[0], args[1]};
        return PyObject_Vectorcall(g_py_activate, call, 3, NULL);
    }
    PyObject *ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    ActObject *act = ident ? (ActObject *)act_new((PyTypeObject *)g_activation, NULL, NULL) : NULL;
    if (act == NULL) {
        Py_XDECREF(ident);
        return NULL;
    }
    Py_INCREF(r);
    Py_SETREF(act->redirect, (PyObject *)r);
    Py_INCREF(r->value);
    Py_SETREF(act->value, r->value);
    Py_INCREF(args[0]);
    Py_SETREF(act->code, args[0]);
    Py_INCREF(args[1]);
    Py_SETREF(act->lasti, args[1]);
    Py_SETREF(act->thread_id, ident);
    act->ctx = r->ctx;
    if (r->spec != Py_None) {
        if (prepare(r, act) < 0)
            goto fail;
    }
    PyObject *lock = lock_acquire(1);
    if (lock == NULL)
        goto fail;
    int failed = enter_locked(r, r->target, r->key, act) < 0;
    if (lock_release(lock) < 0 || failed)
        goto fail;
    if (act->slot != Py_None && push_context(act) < 0) {
        /* Registered but not visible (out of memory): end it again. */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        lock = lock_acquire(0);
        if (lock != NULL)
            Py_XDECREF(end_locked(act, lock));
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
        goto fail;
    }
    return (PyObject *)act;
fail:
    Py_DECREF(act);
    return NULL;
}

static PyObject *
redirect_c_enter(RedirectObject *r, PyObject *unused)
{
    REQUIRE_BOUND(NULL)
    PyFrameObject *frame = PyEval_GetFrame(); /* the with-statement's frame */
    if (frame == NULL || r->key == Py_None || !PyList_Check(r->handles))
        return PyObject_CallOneArg(g_py_enter, (PyObject *)r);
    PyObject *site = (PyObject *)frame;
    Py_INCREF(site);
    PyObject *code = (PyObject *)PyFrame_GetCode(frame);
    if (code == g_enter_context) {
        /* ExitStack.enter_context calls __enter__ for its caller: report the caller. */
        PyFrameObject *back = PyFrame_GetBack(frame);
        if (back != NULL) {
            Py_SETREF(site, (PyObject *)back);
            Py_SETREF(code, (PyObject *)PyFrame_GetCode(back));
        }
    }
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *lasti = PyLong_FromLong(PyFrame_GetLasti((PyFrameObject *)site));
#else
    PyObject *lasti = PyObject_GetAttrString(site, "f_lasti");
#endif
    Py_DECREF(site);
    if (lasti == NULL) {
        Py_DECREF(code);
        return NULL;
    }
    PyObject *ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    PyTypeObject *act_type = (PyTypeObject *)g_activation;
    ActObject *act = ident ? (ActObject *)act_new(act_type, NULL, NULL) : NULL;
    if (act == NULL) {
        Py_XDECREF(ident);
        Py_DECREF(code);
        Py_DECREF(lasti);
        return NULL;
    }
    Py_INCREF(r);
    Py_SETREF(act->redirect, (PyObject *)r);
    Py_INCREF(r->value);
    Py_SETREF(act->value, r->value);
    Py_SETREF(act->code, code);
    Py_SETREF(act->lasti, lasti);
    Py_SETREF(act->thread_id, ident);
    act->ctx = r->ctx;
    if (r->spec != Py_None) {
        if (prepare(r, act) < 0)
            goto fail;
    }
    PyObject *target = r->target;
    PyObject *lock = lock_acquire(1);
    if (lock == NULL)
        goto fail;
    if (enter_locked(r, target, r->key, act) < 0)
        goto fail_locked;
    if (PyList_GET_SIZE(r->handles) == 0) {
        Py_INCREF(frame);
        Py_SETREF(act->frame, (PyObject *)frame);
        if (PyList_Append(r->handles, (PyObject *)act) < 0)
            goto fail_registered;
    }
    else {
        PyObject *args[] = {r->handles, (PyObject *)act, (PyObject *)frame};
        PyObject *res = PyObject_Vectorcall(g_pair_enter, args, 3, NULL);
        if (res == NULL)
            goto fail_registered;
        Py_DECREF(res);
    }
    if (lock_release(lock) < 0)
        goto fail;
    if (act->slot != Py_None && push_context(act) < 0)
        goto fail;
    if (act->pushed) {
        PyObject *args[] = {r->handles, (PyObject *)act};
        PyObject *res = PyObject_Vectorcall(g_push_with, args, 2, NULL);
        if (res == NULL)
            goto fail;
        Py_DECREF(res);
    }
    Py_DECREF(act);
    Py_INCREF(r->replacement);
    return r->replacement;

fail_registered : {
    /* Entered but not paired (out of memory): end it again. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *res = PyObject_CallOneArg(g_exit_locked, (PyObject *)act);
    Py_XDECREF(res);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}
fail_locked:
    lock_release(lock);
fail:
    Py_DECREF(act);
    return NULL;
}

/* The last activation of its entry ends: the common exit, done here.
 * Returns 1 if done (with *conflict set, a new reference, or NULL for none,
 * and *error set likewise), 0 if the general path must do it, -1 on error. */
static int
exit_last(ActObject *act, PyObject **conflict, PyObject **error)
{
    *conflict = NULL;
    *error = NULL;
    if (!PyObject_TypeCheck(act->entry, &EntryType))
        return 0;
    EntryObject *entry = (EntryObject *)act->entry;
    if (PyList_GET_SIZE(entry->stack) != 1 || PyList_GET_ITEM(entry->stack, 0) != (PyObject *)act ||
        entry->kind == SETATTR || (entry->written && act->ctx))
        return 0;
    PyObject *target = entry->target;
    PyObject *dict = target_dict(target);
    if (dict == NULL)
        return 0;
    PyObject *expected;
    if (entry->slot == Py_None) {
        expected = entry->installed;
    }
    else if (act->ctx && (PyObject *)Py_TYPE(entry->slot) == g_module_slot) {
        PyObject *id = PyTuple_GET_ITEM(entry->key, 0); /* id(target) */
        Py_INCREF(id);
        PyObject *swap = PyDict_GetItemWithError(g_swaps, id);
        if (swap == NULL || !PyList_Check(swap) || PyList_GET_SIZE(swap) != 3) {
            Py_DECREF(id);
            return PyErr_Occurred() ? -1 : 0;
        }
        Py_INCREF(swap);
        PyObject *parked = entry->parked;
        if (PyTuple_Check(parked) && PyTuple_GET_SIZE(parked) == 3 &&
            PyTuple_GET_ITEM(parked, 0) == PyList_GET_ITEM(swap, 0) &&
            PyTuple_GET_ITEM(parked, 1) == PyList_GET_ITEM(swap, 1) &&
            PyTuple_GET_ITEM(parked, 2) == entry->slot)
            Py_INCREF(parked); /* the same as last time */
        else
            parked = PyTuple_Pack(3, PyList_GET_ITEM(swap, 0), PyList_GET_ITEM(swap, 1),
                                  entry->slot);
        if (parked == NULL) {
            Py_DECREF(swap);
            Py_DECREF(id);
            return -1;
        }
        long count = PyLong_AsLong(PyList_GET_ITEM(swap, 2));
        if (count == 1) {
            if (PyDict_DelItem(g_swaps, id) < 0) {
                Py_DECREF(parked);
                Py_DECREF(swap);
                Py_DECREF(id);
                return -1;
            }
            PyObject *base = PyList_GET_ITEM(swap, 0);
            if ((PyObject *)Py_TYPE(target) == PyList_GET_ITEM(swap, 1) && PyType_Check(base) &&
                swappable((PyTypeObject *)base, (PyObject *)Py_TYPE(target)))
                swap_module_class(target, (PyTypeObject *)base);
        }
        else {
            PyObject *less = PyLong_FromLong(count - 1);
            if (less == NULL) {
                Py_DECREF(parked);
                Py_DECREF(swap);
                Py_DECREF(id);
                return -1;
            }
            PyList_SetItem(swap, 2, less);
        }
        Py_DECREF(swap);
        Py_DECREF(id);
        Py_SETREF(entry->parked, parked);
        entry->n_context = 0;
        Py_INCREF(Py_None);
        Py_SETREF(entry->slot, Py_None);
        expected = entry->kind == OWN ? entry->original : g_absent;
    }
    else {
        return 0;
    }
    Py_INCREF(expected);
    act->open = 0;
    if (PyList_SetSlice(entry->stack, 0, 1, NULL) < 0 ||
        PyDict_DelItem(g_entries, entry->key) < 0) {
        Py_DECREF(expected);
        return -1;
    }
    PyObject *current = PyDict_GetItemWithError(dict, entry->name);
    if (current == NULL && PyErr_Occurred()) {
        Py_DECREF(expected);
        return -1;
    }
    if (current == NULL)
        current = g_absent;
    if (current != expected) {
        /* Someone else rebound the name while we held it. */
        Py_INCREF(current);
        *conflict = current;
        entry->written = 1;
    }
    Py_DECREF(expected);
    if (entry->written) {
        int failed;
        if (entry->kind == OWN) {
            entry->written = 0;
            Py_INCREF(g_absent);
            Py_SETREF(entry->installed, g_absent);
            failed = PyObject_SetAttr(target, entry->name, entry->original) < 0;
        }
        else {
            /* SHADOW: delete what shadows the inherited value, if it is there. */
            entry->written = 0;
            Py_INCREF(g_absent);
            Py_SETREF(entry->installed, g_absent);
            failed = 0;
            if (current != g_absent) {
                if (PyType_Check(target) && PyUnicode_Compare(entry->name, s_new) == 0)
                    failed = delete_new((PyTypeObject *)target) < 0;
                else
                    failed = PyObject_DelAttr(target, entry->name) < 0;
            }
        }
        if (failed) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (tb != NULL)
                PyException_SetTraceback(value, tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
            if (!PyObject_TypeCheck(value, (PyTypeObject *)PyExc_Exception)) {
                /* KeyboardInterrupt and the like propagate. */
                PyErr_SetObject((PyObject *)Py_TYPE(value), value);
                Py_DECREF(value);
                Py_CLEAR(*conflict);
                return -1;
            }
            *error = value;
        }
    }
    if (*error == NULL && PyObject_TypeCheck(act->redirect, &RedirectType) &&
        ((RedirectObject *)act->redirect)->plain) {
        RedirectObject *r = (RedirectObject *)act->redirect;
        Py_INCREF(entry);
        Py_SETREF(r->spare, (PyObject *)entry);
    }
    return 1;
}

/* End *act*, entered with the lock held: releases it. Warns about
 * conflicts and raises RestoreError through _after_exit, as the Python path. */
static PyObject *
end_locked(ActObject *act, PyObject *lock)
{
    if (!act->open) {
        if (lock_release(lock) < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *conflict = NULL, *error = NULL;
    int done = exit_last(act, &conflict, &error);
    if (done < 0) {
        lock_release(lock);
        return NULL;
    }
    if (!done) {
        PyObject *pair = PyObject_CallOneArg(g_exit_locked, (PyObject *)act);
        if (lock_release(lock) < 0 || pair == NULL) {
            Py_XDECREF(pair);
            return NULL;
        }
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            Py_DECREF(pair);
            PyErr_SetString(PyExc_TypeError, "_exit_locked must return a pair");
            return NULL;
        }
        /* (conflict or _NO_CONFLICT, error or None): hand both to _after_exit. */
        PyObject *call[] = {(PyObject *)act, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)};
        PyObject *res = PyObject_Vectorcall(g_after_exit, call, 3, NULL);
        Py_DECREF(pair);
        return res;
    }
    if (lock_release(lock) < 0) {
        Py_XDECREF(conflict);
        Py_XDECREF(error);
        return NULL;
    }
    if (conflict == NULL && error == NULL) {
        if (act->slot == Py_None)
            Py_RETURN_NONE;
        /* This context's variable held just this activation: empty it. */
        PyObject *var = slot_var(act->slot), *acts;
        if (var == NULL || PyContextVar_Get(var, empty_tuple, &acts) < 0) {
            Py_XDECREF(var);
            return NULL;
        }
        int only = PyTuple_Check(acts) && PyTuple_GET_SIZE(acts) == 1 &&
                   PyTuple_GET_ITEM(acts, 0) == (PyObject *)act;
        Py_DECREF(acts);
        if (only) {
            PyObject *token = PyContextVar_Set(var, empty_tuple);
            Py_DECREF(var);
            if (token == NULL)
                return NULL;
            Py_DECREF(token);
            Py_RETURN_NONE;
        }
        Py_DECREF(var);
    }
    /* Conflicts, failed restores and other contexts' leftovers: the Python path. */
    PyObject *no_conflict = PyDict_GetItemString(g_registry, "_NO_CONFLICT");
    PyObject *call[] = {(PyObject *)act, conflict ? conflict : no_conflict,
                        error ? error : Py_None};
    PyObject *res = no_conflict ? PyObject_Vectorcall(g_after_exit, call, 3, NULL) : NULL;
    Py_XDECREF(conflict);
    Py_XDECREF(error);
    return res;
}

static PyObject *
redirect_c_exit(RedirectObject *r, PyObject *const *args, Py_ssize_t nargs)
{
    REQUIRE_BOUND(NULL)
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame == NULL || !PyList_Check(r->handles))
        return PyObject_Vectorcall(g_py_exit, (PyObject *[]){(PyObject *)r}, 1, NULL);
    PyObject *lock = lock_acquire(0); /* ending: not interruptible */
    if (lock == NULL)
        return NULL;
    PyObject *handles = r->handles;
    ActObject *act = NULL;
    if (PyList_GET_SIZE(handles) == 1) {
        PyObject *only = PyList_GET_ITEM(handles, 0);
        if (PyObject_TypeCheck(only, &ActType) && ((ActObject *)only)->frame == (PyObject *)frame &&
            !((ActObject *)only)->pushed) {
            Py_INCREF(only);
            act = (ActObject *)only;
            if (PyList_SetSlice(handles, 0, 1, NULL) < 0)
                goto fail_locked;
            Py_INCREF(Py_None);
            Py_SETREF(act->frame, Py_None);
        }
    }
    if (act == NULL) {
        PyObject *pair_args[] = {handles, (PyObject *)frame};
        PyObject *found = PyObject_Vectorcall(g_pair_exit, pair_args, 2, NULL);
        if (found == NULL)
            goto fail_locked;
        if (!PyObject_TypeCheck(found, &ActType)) {
            Py_DECREF(found);
            PyErr_SetString(PyExc_TypeError, "with-handle of a single redirect is not an Activation");
            goto fail_locked;
        }
        act = (ActObject *)found;
    }
    PyObject *res = end_locked(act, lock);
    Py_DECREF(act);
    return res;
fail_locked:
    Py_XDECREF(act);
    lock_release(lock);
    return NULL;
}

/* _registry.exit_activation: end *act*; idempotent. */
static PyObject *
exit_activation(PyObject *module, PyObject *act)
{
    REQUIRE_BOUND(NULL)
    if (!PyObject_TypeCheck(act, &ActType)) {
        PyErr_SetString(PyExc_TypeError, "exit_activation(activation)");
        return NULL;
    }
    PyObject *lock = lock_acquire(0); /* ending: not interruptible */
    if (lock == NULL)
        return NULL;
    return end_locked((ActObject *)act, lock);
}

static PyMethodDef redirect_methods[] = {
    {"_c_activate", (PyCFunction)(void (*)(void))redirect_c_activate, METH_FASTCALL, NULL},
    {"_c_enter", (PyCFunction)redirect_c_enter, METH_NOARGS, NULL},
    {"_c_exit", (PyCFunction)(void (*)(void))redirect_c_exit, METH_FASTCALL, NULL},
    {NULL},
};

static PyMemberDef redirect_members[] = {
    {"_handles", T_OBJECT, offsetof(RedirectObject, handles), 0, NULL},
    {"_key", T_OBJECT, offsetof(RedirectObject, key), 0, NULL},
    {"_target", T_OBJECT, offsetof(RedirectObject, target), 0, NULL},
    {"_value", T_OBJECT, offsetof(RedirectObject, value), 0, NULL},
    {"_spare", T_OBJECT, offsetof(RedirectObject, spare), 0, NULL},
    {"_spec", T_OBJECT, offsetof(RedirectObject, spec), 0, NULL},
    {"_replacement", T_OBJECT, offsetof(RedirectObject, replacement), 0, NULL},
    {"_name", T_OBJECT, offsetof(RedirectObject, name), 0, NULL},
    {"_scope", T_OBJECT, offsetof(RedirectObject, scope), 0, NULL},
    {"_slot", T_OBJECT, offsetof(RedirectObject, slot), 0, NULL},
    {"_base", T_OBJECT, offsetof(RedirectObject, base), 0, NULL},
    {"_ctx", T_BOOL, offsetof(RedirectObject, ctx), 0, NULL},
    {"_plain", T_BOOL, offsetof(RedirectObject, plain), 0, NULL},
    {"_create", T_BOOL, offsetof(RedirectObject, create), 0, NULL},
    {NULL},
};

static PyTypeObject RedirectType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.RedirectBase",
    .tp_basicsize = sizeof(RedirectObject),
    .tp_setattro = refuse_delete,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = redirect_new,
    .tp_init = redirect_init,
    .tp_traverse = (traverseproc)redirect_traverse,
    .tp_clear = (inquiry)redirect_clear,
    .tp_dealloc = (destructor)redirect_dealloc,
    .tp_members = redirect_members,
    .tp_methods = redirect_methods,
};

/* ------------------------------------------------------------------------ */
/* NewDispatcher: the __new__ that redirect_construction installs
 *
 * Calls from a context where no activation applies (another thread, say)
 * construct the class as before, here; everything else (this context's
 * activations, process-scope ones, subclasses, arguments to an inherited
 * object.__new__) goes to the Python dispatcher in _construct, the reference. */

typedef struct {
    PyObject_HEAD
    PyObject *fallback, *cls_ref, *key, *var, *base, *rebuilders, *dict;
    Py_hash_t key_hash; /* tuples do not cache their hash */
    vectorcallfunc vectorcall;
} DispObject;

static PyObject *s_replacement, *s_subclass_replacement;

/* This context's innermost open activation in *acts* (borrowed), NULL if
 * there is none; *unknown is set when something other than an activation is
 * there. */
static ActObject *
innermost_act(PyObject *acts, int *unknown)
{
    *unknown = 0;
    if (!PyTuple_Check(acts)) {
        *unknown = 1;
        return NULL;
    }
    for (Py_ssize_t i = PyTuple_GET_SIZE(acts) - 1; i >= 0; i--) {
        PyObject *act = PyTuple_GET_ITEM(acts, i);
        if (!PyObject_TypeCheck(act, &ActType)) {
            *unknown = 1;
            return NULL;
        }
        if (((ActObject *)act)->open)
            return (ActObject *)act;
    }
    return NULL;
}

/* Build this context's replacement for a call of the class itself: 1 done
 * (*built set), 0 when the Python dispatcher must decide, -1 on error. */
static int
build_here(DispObject *self, ActObject *act, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames, PyObject **built)
{
    /* copy/deepcopy rebuild an existing instance (the Python dispatcher
     * builds the real class then): their frame is the caller here. */
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame != NULL) {
        PyObject *code = (PyObject *)PyFrame_GetCode(frame);
        int rebuild = PySet_Contains(self->rebuilders, code);
        Py_DECREF(code);
        if (rebuild != 0)
            return rebuild < 0 ? -1 : 0;
    }
    PyObject *sub = PyObject_GetAttr(act->spec, s_subclass_replacement);
    if (sub == NULL)
        return -1;
    int is_sub = PyObject_IsTrue(sub);
    Py_DECREF(sub);
    if (is_sub != 0)
        return is_sub < 0 ? -1 : 0;
    PyObject *replacement = PyObject_GetAttr(act->spec, s_replacement);
    if (replacement == NULL)
        return -1;
    *built = PyObject_Vectorcall(replacement, args + 1, nargs - 1, kwnames);
    Py_DECREF(replacement);
    return *built == NULL ? -1 : 1;
}

static PyObject *g_object_new; /* object.__dict__["__new__"] */

static PyObject *
disp_vectorcall(DispObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    REQUIRE_BOUND(NULL)
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1)
        goto fallback;
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *cls;
    if (PyWeakref_GetRef(self->cls_ref, &cls) < 0)
        return NULL;
    Py_XDECREF(cls); /* only compared: args[0] keeps a live class alive */
#else
    PyObject *cls = PyWeakref_GetObject(self->cls_ref); /* None once the class died */
#endif
    if (args[0] != cls || !PyType_Check(cls))
        goto fallback;
    PyObject *acts;
    if (PyContextVar_Get(self->var, empty_tuple, &acts) < 0)
        return NULL;
    int unknown;
    ActObject *here = innermost_act(acts, &unknown);
    if (here != NULL) {
        /* This context's innermost activation wins. */
        PyObject *built = NULL;
        Py_INCREF(here);
        int done = build_here(self, here, args, nargs, kwnames, &built);
        Py_DECREF(here);
        Py_DECREF(acts);
        if (done < 0)
            return NULL;
        if (done)
            return built;
        goto fallback;
    }
    Py_DECREF(acts);
    if (unknown)
        goto fallback;
    PyObject *entry = _PyDict_GetItem_KnownHash(g_entries, self->key, self->key_hash);
    if (entry == NULL && PyErr_Occurred())
        return NULL;
    if (entry != NULL) {
        if (!PyObject_TypeCheck(entry, &EntryType) || ((EntryObject *)entry)->kind == OWN)
            goto fallback;
        PyObject *stack = ((EntryObject *)entry)->stack;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stack); i++) {
            PyObject *act = PyList_GET_ITEM(stack, i);
            if (!PyObject_TypeCheck(act, &ActType))
                goto fallback;
            /* Process-scope constructions are the ones without a context
             * slot (ConstructionRedirect._prepare). */
            if (((ActObject *)act)->open && ((ActObject *)act)->slot == Py_None)
                goto fallback;
        }
    }
    if (!PyList_Check(self->base) || PyList_GET_SIZE(self->base) != 1)
        goto fallback;
    PyObject *base_new = PyList_GET_ITEM(self->base, 0);
    if (base_new == g_object_new) {
        if (nargs == 1 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0))
            return PyBaseObject_Type.tp_new((PyTypeObject *)args[0], empty_tuple, NULL);
        goto fallback; /* object.__new__'s rules on extra arguments */
    }
    Py_INCREF(base_new); /* an activation elsewhere may refresh base[0] meanwhile */
    PyObject *built = PyObject_Vectorcall(base_new, args, nargsf, kwnames);
    Py_DECREF(base_new);
    return built;

fallback:
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static PyObject *
disp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *fallback, *cls_ref, *key, *var, *base, *rebuilders;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!:NewDispatcher", &fallback, &_PyWeakref_RefType,
                          &cls_ref, &PyTuple_Type, &key, &PyContextVar_Type, &var,
                          &PyList_Type, &base, &PyFrozenSet_Type, &rebuilders))
        return NULL;
    Py_hash_t key_hash = PyObject_Hash(key);
    if (key_hash == -1)
        return NULL;
    DispObject *self = (DispObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->key_hash = key_hash;
    PyObject **fields[] = {&self->fallback, &self->cls_ref, &self->key,
                           &self->var,      &self->base,    &self->rebuilders};
    PyObject *values[] = {fallback, cls_ref, key, var, base, rebuilders};
    for (size_t i = 0; i < 6; i++) {
        Py_INCREF(values[i]);
        *fields[i] = values[i];
    }
    self->vectorcall = (vectorcallfunc)disp_vectorcall;
    return (PyObject *)self;
}

static int
disp_traverse(DispObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->fallback);
    Py_VISIT(self->cls_ref);
    Py_VISIT(self->var);
    Py_VISIT(self->base);
    Py_VISIT(self->dict);
    return 0;
}

static int
disp_clear(DispObject *self)
{
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->cls_ref);
    Py_CLEAR(self->key);
    Py_CLEAR(self->var);
    Py_CLEAR(self->base);
    Py_CLEAR(self->rebuilders);
    Py_CLEAR(self->dict);
    return 0;
}

static void
disp_dealloc(DispObject *self)
{
    PyObject_GC_UnTrack(self);
    disp_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyGetSetDef disp_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyTypeObject DispType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.NewDispatcher",
    .tp_doc = "The __new__ a construction redirect installs (see _construct._Dispatcher).",
    .tp_basicsize = sizeof(DispObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = disp_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DispObject, vectorcall),
    .tp_dictoffset = offsetof(DispObject, dict),
    .tp_getset = disp_getset,
    .tp_traverse = (traverseproc)disp_traverse,
    .tp_clear = (inquiry)disp_clear,
    .tp_dealloc = (destructor)disp_dealloc,
};

/* ------------------------------------------------------------------------ */
/* repair_new(cls): object's tp_new back after deleting an inherited __new__ */

static int
inherits_object_new(PyTypeObject *type)
{
    /* object.__new__ is not a descriptor: getattr gives the raw value. */
    PyObject *found = PyObject_GetAttr((PyObject *)type, s_new);
    if (found == NULL)
        return -1;
    int inherits = found == g_object_new;
    Py_DECREF(found);
    return inherits;
}

/* See _cpython.py: CPython keeps the generic "look __new__ up" slot after
 * `del cls.__new__`; put object's own back in cls and in the subclasses that
 * inherited the change, as a class that never had a __new__ would have. */
static int
repair_one(PyTypeObject *type)
{
    if (!PyType_HasFeature(type, Py_TPFLAGS_HEAPTYPE) ||
        PyType_HasFeature(type, Py_TPFLAGS_IMMUTABLETYPE))
        return 0;
    int inherits = inherits_object_new(type);
    if (inherits <= 0)
        return inherits;
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
    Py_ssize_t i = 0;
    while (mro != NULL && i < PyTuple_GET_SIZE(mro) &&
           PyTuple_GET_ITEM(mro, i) != (PyObject *)after)
        i++;
    for (i++; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *klass = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (klass == &PyBaseObject_Type)
            return g_object_new;
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *dict = PyType_GetDict(klass); /* tp_dict is NULL for builtins */
        PyObject *raw = dict ? PyDict_GetItemWithError(dict, s_new) : NULL;
        Py_XDECREF(dict); /* the type keeps it alive, and raw with it */
#else
        PyObject *raw = klass->tp_dict ? PyDict_GetItemWithError(klass->tp_dict, s_new) : NULL;
#endif
        if (raw != NULL || PyErr_Occurred())
            return raw;
    }
    return NULL;
}

/* The raw __new__ that *type* inherits (see new_after_class). */
static PyObject *
new_after(PyTypeObject *type)
{
    return new_after_class(type, type);
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

/* The tp_new a class gets by inheriting the raw __new__ *inherited*, when
 * that is a builtin type's own (object's, dict's, ...: they all wrap their
 * type's tp_new the same way); NULL otherwise. */
static newfunc
builtin_tp_new(PyObject *inherited)
{
    if (inherited == NULL || !PyCFunction_Check(inherited) ||
        PyCFunction_GET_FUNCTION(inherited) != PyCFunction_GET_FUNCTION(g_object_new))
        return NULL;
    PyObject *owner = PyCFunction_GET_SELF(inherited);
    return owner != NULL && PyType_Check(owner) ? ((PyTypeObject *)owner)->tp_new : NULL;
}

/* Before `del root.__new__` (*removed*): give *type* (root or a subclass
 * that gets its __new__ from root) the tp_new of the builtin __new__ it
 * inherits once root's is gone, and the same for its subclasses. The delete
 * keeps a tp_new that is already right (update_one_slot in
 * Objects/typeobject.c), so no construction, in any thread, ever meets the
 * generic "look __new__ up" slot in between, and the classes end with the
 * slot they had before the redirect. */
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
        if (_PyType_Lookup(sub, s_new) != removed)
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
    PyObject *removed = _PyType_Lookup(cls, s_new);
    PyObject *inherited = new_after(cls);
    if (inherited == NULL && PyErr_Occurred())
        return -1;
    newfunc tp_new = builtin_tp_new(inherited);
    if (removed == NULL || tp_new == NULL)
        return 0;
    Py_INCREF(removed);
    int failed = preset_one(cls, removed, cls, tp_new) < 0;
    Py_DECREF(removed);
    return failed ? -1 : 1;
}

/* Delete cls.__new__ (a redirect's dispatcher) so that cls constructs
 * exactly as before it had one. */
static int
delete_new(PyTypeObject *cls)
{
    if (preset(cls) < 0)
        return -1;
    return PyObject_DelAttr((PyObject *)cls, s_new);
}

static PyObject *
preset_new(PyObject *module, PyObject *cls)
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

static PyObject *
repair_new(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "repair_new() takes a class");
        return NULL;
    }
    if (repair_one((PyTypeObject *)cls) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* ------------------------------------------------------------------------ */
/* bind(namespace): take what the fast path needs from _registry */

static PyObject *
bind(PyObject *module, PyObject *ns)
{
    if (!PyDict_Check(ns)) {
        PyErr_SetString(PyExc_TypeError, "bind() takes the registry's globals()");
        return NULL;
    }
    struct {
        const char *name;
        PyObject **slot;
    } wanted[] = {
        {"_entries", &g_entries},
        {"_module_swaps", &g_swaps},
        {"ABSENT", &g_absent},
        {"_ENTER_CONTEXT", &g_enter_context},
        {"Activation", &g_activation},
        {"_ModuleSlot", &g_module_slot},
        {"_enter_with", &g_py_enter},
        {"_exit_with", &g_py_exit},
        {"_enter_locked", &g_enter_locked},
        {"_pair_enter", &g_pair_enter},
        {"_push_with", &g_push_with},
        {"_pair_exit", &g_pair_exit},
        {"_exit_locked", &g_exit_locked},
        {"_after_exit", &g_after_exit},
        {"_activate", &g_py_activate},
    };
    for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
        PyObject *value = PyDict_GetItemString(ns, wanted[i].name);
        if (value == NULL) {
            PyErr_Format(PyExc_KeyError, "bind(): the registry has no %s", wanted[i].name);
            return NULL;
        }
        Py_INCREF(value);
        Py_XSETREF(*wanted[i].slot, value);
    }
    if (!PyType_Check(g_activation) ||
        !PyType_IsSubtype((PyTypeObject *)g_activation, &ActType)) {
        PyErr_SetString(PyExc_TypeError, "bind(): Activation must derive from ActivationBase");
        return NULL;
    }
    Py_INCREF(ns);
    Py_XSETREF(g_registry, ns);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "Bind the fast path to the registry's globals()."},
    {"enter_activation", (PyCFunction)(void (*)(void))enter_activation, METH_FASTCALL,
     "Register an activation and make it visible (see _registry)."},
    {"exit_activation", exit_activation, METH_O, "End an activation; idempotent."},
    {"preset_new", preset_new, METH_O,
     "Before del cls.__new__: the inherited builtin tp_new for cls and its followers."},
    {"repair_new", repair_new, METH_O,
     "Give cls (and subclasses following it) object's tp_new back; True."},
    {NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "patchscope._speedups",
    "C versions of the registry's records and its with fast path.", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    s_lock = PyUnicode_InternFromString("_lock");
    s_open = PyUnicode_InternFromString("open");
    s_value = PyUnicode_InternFromString("_value");
    s_new = PyUnicode_InternFromString("__new__");
    s_prepare = PyUnicode_InternFromString("_prepare");
    s_var = PyUnicode_InternFromString("var");
    empty_tuple = PyTuple_New(0);
    if (!s_lock || !s_open || !s_value || !s_new || !s_prepare || !s_var ||
        !empty_tuple)
        return NULL;
    s_inherited = PyUnicode_InternFromString("_inherited_get");
    s_qualname = PyUnicode_InternFromString("__qualname__");
    if (s_inherited == NULL || s_qualname == NULL)
        return NULL;
    s_replacement = PyUnicode_InternFromString("replacement");
    s_subclass_replacement = PyUnicode_InternFromString("subclass_replacement");
    g_object_new = PyObject_GetAttr((PyObject *)&PyBaseObject_Type, s_new);
    if (g_object_new == NULL || s_replacement == NULL || s_subclass_replacement == NULL)
        return NULL;
    if (PyType_Ready(&ActType) < 0 || PyType_Ready(&EntryType) < 0 ||
        PyType_Ready(&SlotType) < 0 || PyType_Ready(&RedirectType) < 0 ||
        PyType_Ready(&DispType) < 0 || PyType_Ready(&LockType) < 0 ||
        PyType_Ready(&ClassSlotType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "ActivationBase", (PyObject *)&ActType) < 0 ||
        PyModule_AddObjectRef(m, "Entry", (PyObject *)&EntryType) < 0 ||
        PyModule_AddObjectRef(m, "ModuleSlot", (PyObject *)&SlotType) < 0 ||
        PyModule_AddObjectRef(m, "RedirectBase", (PyObject *)&RedirectType) < 0 ||
        PyModule_AddObjectRef(m, "NewDispatcher", (PyObject *)&DispType) < 0 ||
        PyModule_AddObjectRef(m, "RLock", (PyObject *)&LockType) < 0 ||
        PyModule_AddObjectRef(m, "ClassSlotBase", (PyObject *)&ClassSlotType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
