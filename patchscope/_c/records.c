/* The records: activations, group handles, entries, and the fields of
 * single-attribute redirects and of groups, as C structs. Twins of
 * _handles._PyActivationBase/_PyGroupBase, _entry._PyEntry and
 * _redirect._PyRedirectCore/_PyGroupCore: same field names, same meaning;
 * keep them in sync. Fields may be set from Python (the Python twins of the
 * operations work on these records too) but not deleted: the C code reads
 * them without checking for NULL. */
#include "speedups.h"

/* An empty list with room for one item: most stacks and with-handle lists
 * never hold more, and the first append then allocates nothing. */
static PyObject *
room_for_one(void)
{
    PyObject *list = PyList_New(1);
    if (list != NULL) {
        PyList_SET_ITEM(list, 0, NULL);
        Py_SET_SIZE(list, 0);
    }
    return list;
}

int
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

static void
act_init_fields(ActObject *self, PyObject *redirect, PyObject *value, PyObject *code, int lasti)
{
    Py_INCREF(Py_None);
    self->frame = Py_None;
    self->thread_id = PyThread_get_thread_ident();
    self->pushed = 0;
    Py_INCREF(redirect);
    self->redirect = redirect;
    Py_INCREF(value);
    self->value = value;
    Py_INCREF(Py_None);
    self->entry = Py_None;
    Py_INCREF(code);
    self->code = code;
    Py_INCREF(Py_None);
    self->slot = Py_None;
    self->lasti = lasti;
    self->open = 0;
    self->ctx = IS_RCORE(redirect) ? ((RCoreObject *)redirect)->ctx : 0;
}

/* A new activation of the handle class configure() gave. */
ActObject *
act_new(PyObject *redirect, PyObject *value, PyObject *code, int lasti)
{
    PyTypeObject *tp = (PyTypeObject *)cfg.activation_type;
    ActObject *self = (ActObject *)tp->tp_alloc(tp, 0);
    if (self == NULL)
        return NULL;
    act_init_fields(self, redirect, value, code, lasti);
    return self;
}

static PyObject *
act_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *redirect, *value, *code;
    int lasti;
    static char *names[] = {"redirect", "value", "code", "lasti", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOi:Activation", names, &redirect, &value,
                                     &code, &lasti))
        return NULL;
    ActObject *self = (ActObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    act_init_fields(self, redirect, value, code, lasti);
    if (!IS_RCORE(redirect)) {
        /* Not a record of ours: read its _ctx as Python code would. */
        PyObject *ctx = PyObject_GetAttrString(redirect, "_ctx");
        int is_ctx = ctx == NULL ? -1 : PyObject_IsTrue(ctx);
        Py_XDECREF(ctx);
        if (is_ctx < 0) {
            Py_DECREF(self);
            return NULL;
        }
        self->ctx = (char)is_ctx;
    }
    return (PyObject *)self;
}

static int
act_traverse(ActObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->frame);
    Py_VISIT(self->redirect);
    Py_VISIT(self->value);
    Py_VISIT(self->entry);
    Py_VISIT(self->code);
    Py_VISIT(self->slot);
    return 0;
}

static int
act_clear(ActObject *self)
{
    Py_CLEAR(self->frame);
    Py_CLEAR(self->redirect);
    Py_CLEAR(self->value);
    Py_CLEAR(self->entry);
    Py_CLEAR(self->code);
    Py_CLEAR(self->slot);
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
    {"_frame", T_OBJECT_EX, offsetof(ActObject, frame), 0, NULL},
    {"thread_id", T_ULONG, offsetof(ActObject, thread_id), 0, NULL},
    {"_pushed", T_BOOL, offsetof(ActObject, pushed), 0, NULL},
    {"_redirect", T_OBJECT_EX, offsetof(ActObject, redirect), 0, NULL},
    {"_value", T_OBJECT_EX, offsetof(ActObject, value), 0, NULL},
    {"_entry", T_OBJECT_EX, offsetof(ActObject, entry), 0, NULL},
    {"_code", T_OBJECT_EX, offsetof(ActObject, code), 0, NULL},
    {"_slot", T_OBJECT_EX, offsetof(ActObject, slot), 0, NULL},
    {"_lasti", T_INT, offsetof(ActObject, lasti), 0, NULL},
    {"open", T_BOOL, offsetof(ActObject, open), 0, NULL},
    {"_ctx", T_BOOL, offsetof(ActObject, ctx), 0, NULL},
    {NULL},
};

static PyMethodDef act_methods[] = {
    {"stop", (PyCFunction)act_stop, METH_NOARGS,
     "End this activation; harmless if it has ended already.\n\n"
     "Raises RestoreError if putting the original back failed (the registry is "
     "consistent either way)."},
    {NULL},
};

PyTypeObject ActType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.ActivationBase",
    .tp_doc = "The fields of an activation (see patchscope.Activation).",
    .tp_basicsize = sizeof(ActObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = act_tp_new,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)act_traverse,
    .tp_clear = (inquiry)act_clear,
    .tp_dealloc = (destructor)act_dealloc,
    .tp_members = act_members,
    .tp_methods = act_methods,
    .tp_weaklistoffset = offsetof(ActObject, weakrefs),
};

/* ------------------------------------------------------------------------ */
/* GroupBase */

static PyObject *
group_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *parts, *value;
    static char *names[] = {"parts", "value", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O:ActivationGroup", names, &PyList_Type,
                                     &parts, &value))
        return NULL;
    GroupHandleObject *self = (GroupHandleObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(Py_None);
    self->frame = Py_None;
    self->thread_id = PyThread_get_thread_ident();
    Py_INCREF(parts);
    self->parts = parts;
    Py_INCREF(value);
    self->value = value;
    return (PyObject *)self;
}

static int
group_traverse(GroupHandleObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->frame);
    Py_VISIT(self->parts);
    Py_VISIT(self->value);
    return 0;
}

static int
group_clear(GroupHandleObject *self)
{
    Py_CLEAR(self->frame);
    Py_CLEAR(self->parts);
    Py_CLEAR(self->value);
    return 0;
}

static void
group_dealloc(GroupHandleObject *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    group_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef group_members[] = {
    {"_frame", T_OBJECT_EX, offsetof(GroupHandleObject, frame), 0, NULL},
    {"thread_id", T_ULONG, offsetof(GroupHandleObject, thread_id), 0, NULL},
    {"_pushed", T_BOOL, offsetof(GroupHandleObject, pushed), 0, NULL},
    {"_parts", T_OBJECT_EX, offsetof(GroupHandleObject, parts), 0, NULL},
    {"value", T_OBJECT_EX, offsetof(GroupHandleObject, value), 0, NULL},
    {NULL},
};

static PyMethodDef group_methods[] = {
    {"stop", (PyCFunction)group_stop, METH_NOARGS,
     "End every part (reverse order); harmless if already stopped."},
    {NULL},
};

PyTypeObject GroupHandleType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.GroupBase",
    .tp_doc = "The fields of a group handle (see patchscope.ActivationGroup).",
    .tp_basicsize = sizeof(GroupHandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = group_tp_new,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)group_traverse,
    .tp_clear = (inquiry)group_clear,
    .tp_dealloc = (destructor)group_dealloc,
    .tp_members = group_members,
    .tp_methods = group_methods,
    .tp_weaklistoffset = offsetof(GroupHandleObject, weakrefs),
};

/* ------------------------------------------------------------------------ */
/* Entry */

EntryObject *
entry_new(PyObject *target, PyObject *name, PyObject *key, Py_hash_t hash, int kind,
          PyObject *original, PyObject *installed)
{
    if (hash == -1 && (hash = PyObject_Hash(key)) == -1)
        return NULL;
    Py_INCREF(key);
    PyObject *stack = room_for_one();
    if (stack == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    EntryObject *self = PyObject_GC_New(EntryObject, &EntryType);
    if (self == NULL) {
        Py_DECREF(key);
        Py_DECREF(stack);
        return NULL;
    }
    Py_INCREF(target);
    self->target = target;
    Py_INCREF(name);
    self->name = name;
    self->key = key;
    self->key_hash = hash;
    self->kind = kind;
    Py_INCREF(original);
    self->original = original;
    Py_INCREF(installed);
    self->installed = installed;
    self->stack = stack;
    Py_INCREF(Py_None);
    self->slot = Py_None;
    PyObject_GC_Track(self);
    return self;
}

static PyObject *
entry_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *target, *name, *original, *installed;
    int kind;
    static char *names[] = {"target", "name", "kind", "original", "installed", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OUiOO:Entry", names, &target, &name, &kind,
                                     &original, &installed))
        return NULL;
    PyObject *key = target_key(target, name);
    if (key == NULL)
        return NULL;
    PyObject *entry = (PyObject *)entry_new(target, name, key, -1, kind, original, installed);
    Py_DECREF(key);
    return entry;
}

static int
entry_traverse(EntryObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->target);
    Py_VISIT(self->original);
    Py_VISIT(self->installed);
    Py_VISIT(self->stack);
    Py_VISIT(self->slot);
    return 0;
}

static int
entry_clear(EntryObject *self)
{
    Py_CLEAR(self->target);
    Py_CLEAR(self->name);
    Py_CLEAR(self->key);
    Py_CLEAR(self->original);
    Py_CLEAR(self->installed);
    Py_CLEAR(self->stack);
    Py_CLEAR(self->slot);
    return 0;
}

static void
entry_dealloc(EntryObject *self)
{
    PyObject_GC_UnTrack(self);
    entry_clear(self);
    PyObject_GC_Del(self);
}

static PyMemberDef entry_members[] = {
    {"target", T_OBJECT_EX, offsetof(EntryObject, target), 0, NULL},
    {"name", T_OBJECT_EX, offsetof(EntryObject, name), 0, NULL},
    {"key", T_OBJECT_EX, offsetof(EntryObject, key), 0, NULL},
    {"kind", T_INT, offsetof(EntryObject, kind), 0, NULL},
    {"original", T_OBJECT_EX, offsetof(EntryObject, original), 0, NULL},
    {"installed", T_OBJECT_EX, offsetof(EntryObject, installed), 0, NULL},
    {"stack", T_OBJECT_EX, offsetof(EntryObject, stack), 0, NULL},
    {"slot", T_OBJECT_EX, offsetof(EntryObject, slot), 0, NULL},
    {NULL},
};

PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.Entry",
    .tp_doc = "One per (target, name) while anything redirects it (see _entry._PyEntry).",
    .tp_basicsize = sizeof(EntryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = entry_tp_new,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_members = entry_members,
};

/* ------------------------------------------------------------------------ */
/* RedirectCore */

static PyObject *
rcore_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    /* Python subclasses pass their own constructor arguments: ignored here. */
    RCoreObject *self = (RCoreObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->handles = room_for_one();
    if (self->handles == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject **fields[] = {&self->key,   &self->target,      &self->name,
                           &self->value, &self->replacement, &self->scope,
                           &self->slot,  &self->spec,        &self->spare,
                           &self->prepared};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        Py_INCREF(Py_None);
        *fields[i] = Py_None;
    }
    return (PyObject *)self;
}

static PyObject *rcore_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds);

Py_hash_t
redirect_key_hash(RCoreObject *redirect)
{
    if (redirect->hashed_key != redirect->key) {
        Py_hash_t hash = PyObject_Hash(redirect->key);
        if (hash == -1)
            return -1;
        set_field(&redirect->hashed_key, redirect->key);
        redirect->key_hash = hash;
    }
    return redirect->key_hash;
}

/* The fields of AttrRedirect(target, name, replacement, create, scope):
 * the twin of _redirect._PyRedirectCore.__init__ given these arguments. */
static int
attr_fields(RCoreObject *self, PyObject *target, PyObject *name, PyObject *replacement,
            int create, PyObject *scope)
{
    set_field(&self->target, target);
    /* Interned, as setattr interns the names it stores: dict lookups then
     * compare by identity. */
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    Py_SETREF(self->name, name);
    set_field(&self->value, replacement);
    set_field(&self->replacement, replacement);
    self->create = (char)create;
    set_field(&self->scope, scope);
    int ctx = PyUnicode_CompareWithASCIIString(scope, "context") == 0;
    self->ctx = (char)ctx;
    if (PyUnicode_Check(target)) {
        set_field(&self->key, Py_None);
        return 0;
    }
    PyObject *key = target_key(target, name);
    if (key == NULL)
        return -1;
    Py_SETREF(self->key, key);
    return 0;
}

/* A new AttrRedirect (of class *cls*) from (target, name, replacement,
 * create, scope), without the generic constructor's argument parsing: for
 * AttrFactory, which checked the arguments. */
PyObject *
rcore_new_attr(PyObject *cls, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(cls) ||
        !PyType_IsSubtype((PyTypeObject *)cls, &RCoreType) || !PyUnicode_Check(args[1]) ||
        !PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "_new(target, name, replacement, create, scope)");
        return NULL;
    }
    int create = PyObject_IsTrue(args[3]);
    if (create < 0)
        return NULL;
    PyObject *self = rcore_tp_new((PyTypeObject *)cls, empty_tuple, NULL);
    if (self == NULL)
        return NULL;
    if (attr_fields((RCoreObject *)self, args[0], args[1], args[2], create, args[4]) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return self;
}

/* With no arguments (RedirectCore.__init__(self), as the Python twin's),
 * nothing more: the fields have their defaults. With the arguments of
 * AttrRedirect(target, name, replacement, create, scope), the twin of
 * _redirect._PyRedirectCore.__init__ given them. */
static int
rcore_tp_init(PyObject *op, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) == 0 && (kwds == NULL || PyDict_GET_SIZE(kwds) == 0))
        return 0;
    PyObject *target, *name, *replacement, *scope;
    int create;
    if (!PyArg_ParseTuple(args, "OUOpU:AttrRedirect", &target, &name, &replacement, &create,
                          &scope))
        return -1;
    return attr_fields((RCoreObject *)op, target, name, replacement, create, scope);
}

static int
rcore_traverse(RCoreObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->handles);
    Py_VISIT(self->target);
    Py_VISIT(self->value);
    Py_VISIT(self->replacement);
    Py_VISIT(self->slot);
    Py_VISIT(self->spec);
    Py_VISIT(self->spare);
    Py_VISIT(self->prepared);
    return 0;
}

static int
rcore_clear(RCoreObject *self)
{
    Py_CLEAR(self->handles);
    Py_CLEAR(self->key);
    Py_CLEAR(self->target);
    Py_CLEAR(self->name);
    Py_CLEAR(self->value);
    Py_CLEAR(self->replacement);
    Py_CLEAR(self->scope);
    Py_CLEAR(self->slot);
    Py_CLEAR(self->spec);
    Py_CLEAR(self->spare);
    Py_CLEAR(self->prepared);
    Py_CLEAR(self->hashed_key);
    return 0;
}

static void
rcore_dealloc(RCoreObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    rcore_clear(self);
    tp->tp_free((PyObject *)self);
}

static PyMemberDef rcore_members[] = {
    {"_handles", T_OBJECT_EX, offsetof(RCoreObject, handles), 0, NULL},
    {"_key", T_OBJECT_EX, offsetof(RCoreObject, key), 0, NULL},
    {"_target", T_OBJECT_EX, offsetof(RCoreObject, target), 0, NULL},
    {"_name", T_OBJECT_EX, offsetof(RCoreObject, name), 0, NULL},
    {"_value", T_OBJECT_EX, offsetof(RCoreObject, value), 0, NULL},
    {"_replacement", T_OBJECT_EX, offsetof(RCoreObject, replacement), 0, NULL},
    {"_scope", T_OBJECT_EX, offsetof(RCoreObject, scope), 0, NULL},
    {"_slot", T_OBJECT_EX, offsetof(RCoreObject, slot), 0, NULL},
    {"_spec", T_OBJECT_EX, offsetof(RCoreObject, spec), 0, NULL},
    {"_prepared", T_OBJECT_EX, offsetof(RCoreObject, prepared), 0, NULL},
    {"_ctx", T_BOOL, offsetof(RCoreObject, ctx), 0, NULL},
    {"_create", T_BOOL, offsetof(RCoreObject, create), 0, NULL},
    {NULL},
};

PyTypeObject RCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.RedirectCore",
    .tp_doc = "The fields of a single-attribute redirect (see _redirect._PyRedirectCore).",
    .tp_basicsize = sizeof(RCoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = rcore_tp_new,
    .tp_init = rcore_tp_init,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)rcore_traverse,
    .tp_clear = (inquiry)rcore_clear,
    .tp_dealloc = (destructor)rcore_dealloc,
    .tp_members = rcore_members,
    .tp_methods = rcore_methods,
    .tp_weaklistoffset = offsetof(RCoreObject, weakrefs),
};

/* ------------------------------------------------------------------------ */
/* GroupCore */

static PyObject *
gcore_tp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    GCoreObject *self = (GCoreObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->handles = PyList_New(0);
    if (self->handles == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    Py_INCREF(empty_tuple);
    self->parts = empty_tuple;
    Py_INCREF(Py_None);
    self->value = Py_None;
    return (PyObject *)self;
}

static int
gcore_tp_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    return 0; /* the fields were set by tp_new; Combined sets its parts */
}

static int
gcore_traverse(GCoreObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->handles);
    Py_VISIT(self->parts);
    Py_VISIT(self->value);
    return 0;
}

static int
gcore_clear(GCoreObject *self)
{
    Py_CLEAR(self->handles);
    Py_CLEAR(self->parts);
    Py_CLEAR(self->value);
    return 0;
}

static void
gcore_dealloc(GCoreObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    gcore_clear(self);
    tp->tp_free((PyObject *)self);
}

static PyMemberDef gcore_members[] = {
    {"_handles", T_OBJECT_EX, offsetof(GCoreObject, handles), 0, NULL},
    {"_parts", T_OBJECT_EX, offsetof(GCoreObject, parts), 0, NULL},
    {"_value", T_OBJECT_EX, offsetof(GCoreObject, value), 0, NULL},
    {NULL},
};

PyTypeObject GCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.GroupCore",
    .tp_doc = "The fields of a group of redirects (see _redirect._PyGroupCore).",
    .tp_basicsize = sizeof(GCoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = gcore_tp_new,
    .tp_init = gcore_tp_init,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)gcore_traverse,
    .tp_clear = (inquiry)gcore_clear,
    .tp_dealloc = (destructor)gcore_dealloc,
    .tp_members = gcore_members,
    .tp_methods = gcore_methods,
    .tp_weaklistoffset = offsetof(GCoreObject, weakrefs),
};
