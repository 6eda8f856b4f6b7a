/* What a context-scope redirect installs on its target: twins of _slots
 * (ModuleSlot, ClassSlot, DataClassSlot, Dispatcher, module_class,
 * is_private_module_class, install, uninstall, displaced, inherited_new).
 * Their __get__ and the dispatcher's call run on every read of a redirected
 * attribute and every construction of a redirected class, from every
 * thread, while the redirect is live; keep them in sync with _slots. */
#include "speedups.h"

/* The value of the innermost open activation in the tuple *acts* (new
 * reference), or NULL without an error when there is none. */
static PyObject *
innermost_value(PyObject *acts, PyObject *slot)
{
    if (!PyTuple_Check(acts))
        return NULL;
    for (Py_ssize_t i = PyTuple_GET_SIZE(acts) - 1; i >= 0; i--) {
        PyObject *act = PyTuple_GET_ITEM(acts, i);
        if (IS_ACT(act)) {
            if (((ActObject *)act)->slot == slot && ((ActObject *)act)->open) {
                Py_INCREF(((ActObject *)act)->value);
                return ((ActObject *)act)->value;
            }
        }
    }
    return NULL;
}

/* This context's value for a slot's variable: new reference or NULL (none). */
static int
context_value(PyObject *var, PyObject *slot, PyObject **value)
{
    PyObject *acts;
    *value = NULL;
    if (PyContextVar_Get(var, empty_tuple, &acts) < 0)
        return -1;
    if (PyTuple_Check(acts) && PyTuple_GET_SIZE(acts))
        *value = innermost_value(acts, slot);
    Py_DECREF(acts);
    return 0;
}

/* The one ContextVar every slot reads, _slots.ACTIVATIONS (configure() gives
 * it): this context's open context-scope activations, of every target. New
 * reference. */
static PyObject *
shared_var(void)
{
    REQUIRE_CONFIGURED(NULL)
    Py_INCREF(cfg.activations);
    return cfg.activations;
}

/* ------------------------------------------------------------------------ */
/* ModuleSlot */

static PyObject *
mslot_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *module, *name, *owner, *var;
    if (!PyArg_ParseTuple(args, "O!UO!O!:ModuleSlot", &PyModule_Type, &module, &name,
                          &PyType_Type, &owner, &PyContextVar_Type, &var))
        return NULL;
    ModuleSlotObject *self = (ModuleSlotObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->dict = PyModule_GetDict(module);
    Py_INCREF(self->dict);
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(owner);
    self->owner = owner;
    Py_INCREF(var);
    self->var = var; /* shared by all slots; each finds its own activations */
    self->module_id = PyLong_FromVoidPtr(module);
    if (self->module_id == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
mslot_traverse(ModuleSlotObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->dict);
    Py_VISIT(self->owner);
    Py_VISIT(self->var);
    Py_VISIT(self->swap);
    return 0;
}

static int
mslot_clear(ModuleSlotObject *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->name);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->var);
    Py_CLEAR(self->module_id);
    Py_CLEAR(self->swap);
    return 0;
}

static void
mslot_dealloc(ModuleSlotObject *self)
{
    PyObject_GC_UnTrack(self);
    mslot_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
mslot_get(ModuleSlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *value;
    if (context_value(self->var, (PyObject *)self, &value) < 0)
        return NULL;
    if (value == ABSENT) {
        /* patchscope.DELETE: this context sees no attribute. */
        Py_DECREF(value);
        PyErr_SetObject(PyExc_AttributeError, self->name);
        return NULL;
    }
    if (value != NULL)
        return value;
    value = PyDict_GetItemWithError(self->dict, self->name);
    if (value != NULL) {
        Py_INCREF(value);
        return value;
    }
    if (!PyErr_Occurred())
        /* module_getattro turns this into the usual message, or calls the
         * module's __getattr__ exactly as without the slot. */
        PyErr_SetObject(PyExc_AttributeError, self->name);
    return NULL;
}

static int
mslot_set(ModuleSlotObject *self, PyObject *instance, PyObject *value)
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

static PyMemberDef mslot_members[] = {
    {"dict", T_OBJECT, offsetof(ModuleSlotObject, dict), READONLY, NULL},
    {"name", T_OBJECT, offsetof(ModuleSlotObject, name), READONLY, NULL},
    {"owner", T_OBJECT_EX, offsetof(ModuleSlotObject, owner), 0, NULL},
    {"var", T_OBJECT, offsetof(ModuleSlotObject, var), READONLY, NULL},
    {NULL},
};

PyTypeObject ModuleSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.ModuleSlot",
    .tp_doc = "Data descriptor on a module's private subclass (see _slots._PyModuleSlot).",
    .tp_basicsize = sizeof(ModuleSlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = mslot_new,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)mslot_traverse,
    .tp_clear = (inquiry)mslot_clear,
    .tp_dealloc = (destructor)mslot_dealloc,
    .tp_members = mslot_members,
    .tp_descr_get = (descrgetfunc)mslot_get,
    .tp_descr_set = (descrsetfunc)mslot_set,
};

/* ------------------------------------------------------------------------ */
/* the private module classes */

/* Reads of the private subclass go to the module type's own lookup; only
 * the function differs, so the specializing interpreter (3.14+) does not
 * read the module's dict past the slots (CPython gh-156399). */
static PyObject *
module_getattro(PyObject *self, PyObject *name)
{
    return PyModule_Type.tp_getattro(self, name);
}

/* The weak reference's callback when a private class dies: its record goes. */
static PyObject *
drop_private(PyObject *id, PyObject *ref)
{
    PyObject *there = PyDict_GetItemWithError(private_classes, id);
    if (there == ref && PyDict_DelItem(private_classes, id) < 0)
        PyErr_Clear();
    PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef drop_private_def = {"drop_private", (PyCFunction)drop_private, METH_O, NULL};

PyObject *
module_class(PyTypeObject *base)
{
    PyObject *name = PyObject_GetAttr((PyObject *)base, s_name);
    PyObject *module = name ? PyObject_GetAttr((PyObject *)base, s_module) : NULL;
    PyObject *ns = module ? Py_BuildValue("{sOsO}", "__slots__", empty_tuple, "__module__",
                                          module)
                          : NULL;
    PyObject *sub = ns ? PyObject_CallFunction((PyObject *)&PyType_Type, "O(O)O", name,
                                               (PyObject *)base, ns)
                       : NULL;
    Py_XDECREF(name);
    Py_XDECREF(module);
    Py_XDECREF(ns);
    if (sub == NULL)
        return NULL;
    PyTypeObject *tp = (PyTypeObject *)sub;
    if (tp->tp_getattro == PyModule_Type.tp_getattro) {
        tp->tp_getattro = module_getattro;
        PyType_Modified(tp);
    }
    PyObject *id = PyLong_FromVoidPtr(sub);
    PyObject *drop = id ? PyCFunction_New(&drop_private_def, id) : NULL;
    PyObject *ref = drop ? PyWeakref_NewRef(sub, drop) : NULL;
    int rc = ref ? PyDict_SetItem(private_classes, id, ref) : -1;
    Py_XDECREF(id);
    Py_XDECREF(drop);
    Py_XDECREF(ref);
    if (rc < 0) {
        Py_DECREF(sub);
        return NULL;
    }
    return sub;
}

int
is_private_class(PyTypeObject *tp)
{
    PyObject *id = PyLong_FromVoidPtr(tp);
    if (id == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *ref = PyDict_GetItemWithError(private_classes, id);
    Py_DECREF(id);
    if (ref == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *obj = get_ref(ref);
    int is = obj == (PyObject *)tp;
    Py_DECREF(obj);
    return is;
}

PyTypeObject *
own_class(PyObject *module)
{
    PyTypeObject *tp = Py_TYPE(module);
    if (tp == &PyModule_Type)
        return tp;
    return is_private_class(tp) ? tp->tp_base : tp;
}

/* ------------------------------------------------------------------------ */
/* ClassSlot, DataClassSlot */

static PyObject *
cslot_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cls, *name, *var;
    if (!PyArg_ParseTuple(args, "O!UO!:ClassSlot", &PyType_Type, &cls, &name,
                          &PyContextVar_Type, &var))
        return NULL;
    /* Weak: the class may die; its slots die with it. */
    PyObject *ref = PyWeakref_NewRef(cls, NULL);
    ClassSlotObject *self = ref ? (ClassSlotObject *)type->tp_alloc(type, 0) : NULL;
    if (self == NULL) {
        Py_XDECREF(ref);
        return NULL;
    }
    self->cls_ref = ref;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(var);
    self->var = var; /* shared by all slots; each finds its own activations */
    Py_INCREF(ABSENT);
    self->fallback = ABSENT;
    Py_INCREF(ABSENT);
    self->displaced = ABSENT;
    return (PyObject *)self;
}

static int
cslot_traverse(ClassSlotObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cls_ref);
    Py_VISIT(self->fallback);
    Py_VISIT(self->displaced);
    Py_VISIT(self->var);
    return 0;
}

static int
cslot_clear(ClassSlotObject *self)
{
    Py_CLEAR(self->cls_ref);
    Py_CLEAR(self->name);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->displaced);
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

/* _chosen: this context's replacement, else the fallback (new reference). */
static PyObject *
cslot_chosen(ClassSlotObject *self)
{
    PyObject *value;
    if (context_value(self->var, (PyObject *)self, &value) < 0)
        return NULL;
    if (value == NULL) {
        value = self->fallback;
        Py_INCREF(value);
    }
    return value;
}

/* _inherited: the raw value from the classes after ours in the reader's MRO
 * (new reference), or ABSENT. */
static PyObject *
cslot_inherited(ClassSlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *through = owner != NULL && owner != Py_None ? owner : (PyObject *)Py_TYPE(instance);
    if (!PyType_Check(through)) {
        PyErr_Format(PyExc_TypeError, "__get__(): the owner must be a class, not %.100s",
                     Py_TYPE(through)->tp_name);
        return NULL;
    }
    PyTypeObject *reader = (PyTypeObject *)through;
    PyObject *cls = get_ref(self->cls_ref);
    PyObject *mro = reader->tp_mro;
    Py_ssize_t n = mro ? PyTuple_GET_SIZE(mro) : 0, start = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyTuple_GET_ITEM(mro, i) == cls) {
            start = i + 1;
            break;
        }
    }
    Py_DECREF(cls);
    if (start < 0) {
        /* Read through a class ours is not a base of. */
        Py_INCREF(ABSENT);
        return ABSENT;
    }
    for (Py_ssize_t i = start; i < n; i++) {
        PyTypeObject *klass = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        PyObject *d = own_dict((PyObject *)klass);
        if (d == NULL)
            continue;
        PyObject *value = PyDict_GetItemWithError(d, self->name);
        Py_DECREF(d);
        if (value != NULL) {
            if (value == object_new && PyUnicode_Compare(self->name, s_new) == 0)
                /* Looked up through the class, object.__new__ rejects the
                 * arguments it ignores when it is the class's own slot. */
                value = cfg.new_standin;
            Py_INCREF(value);
            return value;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    Py_INCREF(ABSENT);
    return ABSENT;
}

/* _inherited_get: what reading gives with no value of ours. */
static PyObject *
cslot_inherited_get(ClassSlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *value = cslot_inherited(self, instance, owner);
    if (value == NULL)
        return NULL;
    if (value != ABSENT) {
        PyObject *bound = bind_raw(value, instance, owner);
        Py_DECREF(value);
        return bound;
    }
    Py_DECREF(value);
    if ((instance == NULL || instance == Py_None) && owner != NULL && owner != Py_None) {
        PyTypeObject *meta = Py_TYPE(owner);
        PyObject *raw = lookup_mro(meta, self->name);
        if (raw != ABSENT) {
            Py_INCREF(raw);
            PyObject *bound = bind_raw(raw, owner, (PyObject *)meta);
            Py_DECREF(raw);
            return bound;
        }
        PyObject *qualname = PyObject_GetAttr(owner, s_qualname);
        if (qualname != NULL) {
            PyErr_Format(PyExc_AttributeError, "type object %R has no attribute %R", qualname,
                         self->name);
            Py_DECREF(qualname);
        }
        return NULL;
    }
    PyObject *qualname = PyObject_GetAttr((PyObject *)Py_TYPE(instance), s_qualname);
    if (qualname != NULL) {
        PyErr_Format(PyExc_AttributeError, "%R object has no attribute %R", qualname,
                     self->name);
        Py_DECREF(qualname);
    }
    return NULL;
}

static PyObject *
cslot_get(ClassSlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *value = cslot_chosen(self);
    if (value == NULL)
        return NULL;
    if (value == ABSENT) {
        Py_DECREF(value);
        return cslot_inherited_get(self, instance, owner);
    }
    PyObject *bound = bind_raw(value, instance, owner);
    Py_DECREF(value);
    return bound;
}

static PyMemberDef cslot_members[] = {
    {"cls_ref", T_OBJECT, offsetof(ClassSlotObject, cls_ref), READONLY, NULL},
    {"name", T_OBJECT, offsetof(ClassSlotObject, name), READONLY, NULL},
    {"fallback", T_OBJECT_EX, offsetof(ClassSlotObject, fallback), 0, NULL},
    {"displaced", T_OBJECT_EX, offsetof(ClassSlotObject, displaced), 0, NULL},
    {"var", T_OBJECT, offsetof(ClassSlotObject, var), READONLY, NULL},
    {NULL},
};

PyTypeObject ClassSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.ClassSlot",
    .tp_doc = "Non-data descriptor in a class's __dict__ (see _slots._PyClassSlot).",
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

static PyObject *
dslot_get(ClassSlotObject *self, PyObject *instance, PyObject *owner)
{
    PyObject *value = cslot_chosen(self);
    if (value == NULL)
        return NULL;
    if (value == ABSENT) {
        Py_DECREF(value);
        value = cslot_inherited(self, instance, owner);
        if (value == NULL)
            return NULL;
        if (value == ABSENT) {
            Py_DECREF(value);
            return cslot_inherited_get(self, instance, owner);
        }
    }
    if (instance != NULL && instance != Py_None && !is_data_descriptor(value)) {
        PyObject *own = PyObject_GetAttr(instance, s_dict);
        if (own == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                Py_DECREF(value);
                return NULL;
            }
            PyErr_Clear();
        }
        else {
            PyObject *found = dict_get(own, self->name);
            Py_DECREF(own);
            if (found == NULL) {
                Py_DECREF(value);
                return NULL;
            }
            if (found != ABSENT) {
                Py_DECREF(value);
                return found;
            }
            Py_DECREF(found);
        }
    }
    PyObject *bound = bind_raw(value, instance, owner);
    Py_DECREF(value);
    return bound;
}

/* _raw: the raw value an instance's assignment or deletion goes through. */
static PyObject *
dslot_raw(ClassSlotObject *self, PyObject *instance)
{
    PyObject *value = cslot_chosen(self);
    if (value != NULL && value == ABSENT) {
        Py_DECREF(value);
        value = cslot_inherited(self, instance, (PyObject *)Py_TYPE(instance));
    }
    if (value != NULL && value == ABSENT) {
        Py_DECREF(value);
        PyObject *qualname = PyObject_GetAttr((PyObject *)Py_TYPE(instance), s_qualname);
        if (qualname != NULL) {
            PyErr_Format(PyExc_AttributeError, "%R object has no attribute %R", qualname,
                         self->name);
            Py_DECREF(qualname);
        }
        return NULL;
    }
    return value;
}

static int
dslot_set(ClassSlotObject *self, PyObject *instance, PyObject *new)
{
    PyObject *value = dslot_raw(self, instance);
    if (value == NULL)
        return -1;
    /* As the Python twin: the value's own __set__ / __delete__ if its type
     * has one, else the instance's __dict__. */
    PyObject *hook = lookup_mro(Py_TYPE(value), new != NULL ? s_set : s_delete);
    int rc;
    if (hook != ABSENT && Py_TYPE(value)->tp_descr_set != NULL) {
        rc = Py_TYPE(value)->tp_descr_set(value, instance, new);
        Py_DECREF(value);
        return rc;
    }
    Py_DECREF(value);
    PyObject *own = PyObject_GetAttr(instance, s_dict);
    if (own == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
        PyObject *tpname = PyObject_GetAttr((PyObject *)Py_TYPE(instance), s_name);
        if (tpname != NULL) {
            PyErr_Format(PyExc_AttributeError, "%R object attribute %R is read-only", tpname,
                         self->name);
            Py_DECREF(tpname);
        }
        return -1;
    }
    if (new != NULL)
        rc = PyObject_SetItem(own, self->name, new);
    else {
        rc = PyObject_DelItem(own, self->name);
        if (rc < 0 && PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
            PyErr_SetObject(PyExc_AttributeError, self->name);
        }
    }
    Py_DECREF(own);
    return rc;
}

PyTypeObject DataClassSlotType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.DataClassSlot",
    .tp_doc = "The slot installed where the original is a data descriptor "
              "(see _slots._PyDataClassSlot).",
    .tp_basicsize = sizeof(ClassSlotObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = cslot_new,
    .tp_setattro = refuse_delete,
    .tp_traverse = (traverseproc)cslot_traverse,
    .tp_clear = (inquiry)cslot_clear,
    .tp_dealloc = (destructor)cslot_dealloc,
    .tp_members = cslot_members,
    .tp_descr_get = (descrgetfunc)dslot_get,
    .tp_descr_set = (descrsetfunc)dslot_set,
};

/* ------------------------------------------------------------------------ */
/* Dispatcher */

/* The replacement if the construction spec *how* applies to *klass*: 1
 * built (*built set), 0 not applied, -1 error. */
static int
build(PyObject *cls, PyObject *how, PyObject *rebuilders, PyObject *const *args,
      Py_ssize_t nargs, PyObject *kwnames, PyObject **built)
{
    PyObject *klass = args[0];
    PyObject *replacement = PyObject_GetAttr(how, s_replacement);
    if (replacement == NULL)
        return -1;
    int applies = klass == cls;
    if (!applies) {
        PyObject *include = PyObject_GetAttr(how, s_include_subclasses);
        int yes = include ? PyObject_IsTrue(include) : -1;
        Py_XDECREF(include);
        if (yes < 0) {
            Py_DECREF(replacement);
            return -1;
        }
        applies = yes && klass != replacement;
    }
    if (!applies) {
        Py_DECREF(replacement);
        return 0;
    }
    /* copy/deepcopy rebuild an existing instance: build the real class. */
    PyFrameObject *frame = PyEval_GetFrame();
    if (frame != NULL) {
        PyObject *code = (PyObject *)PyFrame_GetCode(frame);
        int rebuild = PySet_Contains(rebuilders, code);
        Py_DECREF(code);
        if (rebuild != 0) {
            Py_DECREF(replacement);
            return rebuild < 0 ? -1 : 0;
        }
    }
    PyObject *sub = PyObject_GetAttr(how, s_subclass_replacement);
    int is_sub = sub ? PyObject_IsTrue(sub) : -1;
    Py_XDECREF(sub);
    if (is_sub < 0) {
        Py_DECREF(replacement);
        return -1;
    }
    if (is_sub) {
        /* type.__call__ then runs replacement.__init__ exactly once. */
        PyObject *new = PyObject_GetAttr(replacement, s_new);
        if (new == NULL) {
            Py_DECREF(replacement);
            return -1;
        }
        Py_ssize_t total = nargs + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
        PyObject **stack = PyMem_Malloc(sizeof(PyObject *) * (size_t)(total > 0 ? total : 1));
        if (stack == NULL) {
            PyErr_NoMemory();
            Py_DECREF(new);
            Py_DECREF(replacement);
            return -1;
        }
        stack[0] = replacement;
        for (Py_ssize_t i = 1; i < total; i++)
            stack[i] = args[i];
        *built = PyObject_Vectorcall(new, stack, nargs, kwnames);
        PyMem_Free(stack);
        Py_DECREF(new);
    }
    else {
        *built = PyObject_Vectorcall(replacement, args + 1, nargs - 1, kwnames);
    }
    Py_DECREF(replacement);
    return *built == NULL ? -1 : 1;
}

static PyObject *
disp_vectorcall(DispObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    REQUIRE_CONFIGURED(NULL)
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *cls = get_ref(self->cls_ref);
    if (cls == Py_None) {
        Py_DECREF(cls);
        PyErr_SetString(PyExc_TypeError,
                        "the class this __new__ was installed on no longer exists");
        return NULL;
    }
    if (nargs < 1 || !PyType_Check(args[0])) {
        Py_DECREF(cls);
        PyErr_SetString(PyExc_TypeError, "__new__(X): X is not a type object");
        return NULL;
    }
    PyObject *klass = args[0], *built = NULL;
    int done = 0;
    /* This context's innermost open activation wins. */
    PyObject *acts;
    if (PyContextVar_Get(self->var, empty_tuple, &acts) < 0)
        goto error;
    Py_ssize_t nacts = PyTuple_Check(acts) ? PyTuple_GET_SIZE(acts) : 0;
    for (Py_ssize_t i = nacts - 1; i >= 0; i--) {
        PyObject *act = PyTuple_GET_ITEM(acts, i);
        if (!IS_ACT(act) || ((ActObject *)act)->slot != (PyObject *)self ||
            !((ActObject *)act)->open)
            continue;
        PyObject *redirect = ((ActObject *)act)->redirect;
        if (!IS_RCORE(redirect))
            break;
        PyObject *spec = ((RCoreObject *)redirect)->spec;
        Py_INCREF(spec);
        done = build(cls, spec, self->rebuilders, args, nargs, kwnames, &built);
        Py_DECREF(spec);
        break;
    }
    Py_DECREF(acts);
    if (done != 0)
        goto finish;
    /* Else the most recent open process-scope one. */
    PyObject *entry = _PyDict_GetItem_KnownHash(self->entries, self->key, self->key_hash);
    if (entry == NULL && PyErr_Occurred())
        goto error;
    if (entry != NULL && PyObject_TypeCheck(entry, &EntryType)) {
        Py_INCREF(entry);
        PyObject *stack = ((EntryObject *)entry)->stack;
        for (Py_ssize_t i = PyList_GET_SIZE(stack) - 1; i >= 0; i--) {
            PyObject *act = PyList_GET_ITEM(stack, i);
            if (!IS_ACT(act) || !((ActObject *)act)->open)
                continue;
            PyObject *redirect = ((ActObject *)act)->redirect;
            if (!IS_RCORE(redirect))
                continue;
            PyObject *spec = ((RCoreObject *)redirect)->spec;
            /* Process-scope constructions are the ones whose activations go on
             * no context variable (the Python twin reads spec.process). */
            if (spec == Py_None || ((RCoreObject *)redirect)->slot != Py_None)
                continue;
            Py_INCREF(spec);
            done = build(cls, spec, self->rebuilders, args, nargs, kwnames, &built);
            Py_DECREF(spec);
            break;
        }
        if (done != 0) {
            Py_DECREF(entry);
            goto finish;
        }
    }
    else {
        entry = NULL; /* none of ours */
    }
    {
        /* The class's own __new__: the entry's original, or (ABSENT there)
         * what the class holds now, when the last activation ended as this
         * call began. */
        PyObject *raw = entry != NULL && ((EntryObject *)entry)->kind == OWN
                            ? ((EntryObject *)entry)->original
                            : ABSENT;
        Py_INCREF(raw);
        Py_XDECREF(entry);
        if (raw == ABSENT) {
            Py_DECREF(raw);
            PyObject *d = own_dict(cls);
            raw = d ? dict_get(d, s_new) : NULL;
            Py_XDECREF(d);
            if (raw == NULL)
                goto error;
            if (dispatcher_of(raw) == self) {
                Py_DECREF(raw);
                raw = ABSENT;
                Py_INCREF(raw);
            }
        }
        if (raw != ABSENT) {
            PyObject *func = PyObject_TypeCheck(raw, &PyStaticMethod_Type)
                                 ? PyObject_GetAttr(raw, s_func)
                                 : (Py_INCREF(raw), raw);
            Py_DECREF(raw);
            built = func ? PyObject_Vectorcall(func, args, nargsf, kwnames) : NULL;
            Py_XDECREF(func);
            Py_DECREF(cls);
            return built;
        }
        Py_DECREF(raw);
    }
    /* Else the class constructs as it would without the dispatcher. */
    PyObject *base_new;
    if (klass == cls) {
        if (!PyList_Check(self->base) || PyList_GET_SIZE(self->base) < 1) {
            PyErr_SetString(PyExc_TypeError, "the dispatcher's fallback is missing");
            goto error;
        }
        base_new = PyList_GET_ITEM(self->base, 0);
        Py_INCREF(base_new);
    }
    else {
        PyObject *sup = PyObject_CallFunctionObjArgs((PyObject *)&PySuper_Type, cls, klass, NULL);
        base_new = sup ? PyObject_GetAttr(sup, s_new) : NULL;
        Py_XDECREF(sup);
        if (base_new == NULL)
            goto error;
    }
    if (base_new == object_new)
        built = call_object_new((PyTypeObject *)klass, args + 1, nargs - 1, kwnames);
    else
        built = PyObject_Vectorcall(base_new, args, nargsf, kwnames);
    Py_DECREF(base_new);
    Py_DECREF(cls);
    return built;

finish:
    Py_DECREF(cls);
    return done < 0 ? NULL : built;
error:
    Py_DECREF(cls);
    return NULL;
}

static PyObject *
disp_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *cls, *var, *base, *entries, *rebuilders;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!:Dispatcher", &PyType_Type, &cls, &PyContextVar_Type,
                          &var, &PyList_Type, &base, &PyDict_Type, &entries, &PyFrozenSet_Type,
                          &rebuilders))
        return NULL;
    PyObject *ref = PyWeakref_NewRef(cls, NULL);
    PyObject *key = ref ? target_key(cls, s_new) : NULL;
    DispObject *self = key ? (DispObject *)type->tp_alloc(type, 0) : NULL;
    if (self == NULL) {
        Py_XDECREF(ref);
        Py_XDECREF(key);
        return NULL;
    }
    self->cls_ref = ref;
    self->key = key;
    self->key_hash = PyObject_Hash(key);
    if (self->key_hash == -1) {
        Py_DECREF(self);
        return NULL;
    }
    PyObject **fields[] = {&self->var, &self->base, &self->entries, &self->rebuilders,
                           &self->displaced};
    PyObject *values[] = {var, base, entries, rebuilders, ABSENT};
    for (size_t i = 0; i < 5; i++) {
        Py_INCREF(values[i]);
        *fields[i] = values[i];
    }
    self->vectorcall = (vectorcallfunc)disp_vectorcall;
    return (PyObject *)self;
}

static int
disp_traverse(DispObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->cls_ref);
    Py_VISIT(self->var);
    Py_VISIT(self->base);
    Py_VISIT(self->entries);
    Py_VISIT(self->displaced);
    Py_VISIT(self->dict);
    return 0;
}

static int
disp_clear(DispObject *self)
{
    Py_CLEAR(self->cls_ref);
    Py_CLEAR(self->key);
    Py_CLEAR(self->var);
    Py_CLEAR(self->base);
    Py_CLEAR(self->entries);
    Py_CLEAR(self->rebuilders);
    Py_CLEAR(self->displaced);
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

static PyMemberDef disp_members[] = {
    {"cls_ref", T_OBJECT, offsetof(DispObject, cls_ref), READONLY, NULL},
    {"key", T_OBJECT, offsetof(DispObject, key), READONLY, NULL},
    {"var", T_OBJECT, offsetof(DispObject, var), READONLY, NULL},
    {"base", T_OBJECT, offsetof(DispObject, base), READONLY, NULL},
    {"entries", T_OBJECT, offsetof(DispObject, entries), READONLY, NULL},
    {"rebuilders", T_OBJECT, offsetof(DispObject, rebuilders), READONLY, NULL},
    {"displaced", T_OBJECT_EX, offsetof(DispObject, displaced), 0, NULL},
    {NULL},
};

static PyGetSetDef disp_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

PyTypeObject DispType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "patchscope._speedups.Dispatcher",
    .tp_doc = "The __new__ a construction redirect installs (see _slots._PyDispatcher).",
    .tp_basicsize = sizeof(DispObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = disp_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(DispObject, vectorcall),
    .tp_dictoffset = offsetof(DispObject, dict),
    .tp_getset = disp_getset,
    .tp_members = disp_members,
    .tp_traverse = (traverseproc)disp_traverse,
    .tp_clear = (inquiry)disp_clear,
    .tp_dealloc = (destructor)disp_dealloc,
};

/* ------------------------------------------------------------------------ */
/* prepare: the cached slots of a target's attribute (twin of _slots._py_prepare
 * with its caches, _module_classes and _class_slots). Entries go when their
 * target dies, through a weak reference's callback. */

static PyObject *module_cache; /* id(module) -> its private subclass */
static PyObject *class_cache;  /* id(class) -> {name: (ClassSlot, DataClassSlot)} */
static PyObject *cache_refs;   /* id(weakref(target)) -> (cache, id(target), weakref) */
static PyObject *forget_func;

/* Keys are ids throughout: a target is never hashed (its metaclass may
 * define __hash__, or refuse it). */
static PyObject *
forget(PyObject *unused, PyObject *ref)
{
    PyObject *ref_id = PyLong_FromVoidPtr(ref);
    PyObject *info = ref_id ? PyDict_GetItemWithError(cache_refs, ref_id) : NULL;
    if (info != NULL) {
        Py_INCREF(info);
        PyObject *cache = PyTuple_GET_ITEM(info, 0), *id = PyTuple_GET_ITEM(info, 1);
        if (PyDict_DelItem(cache, id) < 0)
            PyErr_Clear();
        /* A module's record of its class switch goes with it. */
        if (cache == module_cache && cfg.swaps != NULL && PyDict_DelItem(cfg.swaps, id) < 0)
            PyErr_Clear();
        if (PyDict_DelItem(cache_refs, ref_id) < 0)
            PyErr_Clear();
        Py_DECREF(info);
    }
    PyErr_Clear();
    Py_XDECREF(ref_id);
    Py_RETURN_NONE;
}

static PyMethodDef forget_def = {"forget", (PyCFunction)forget, METH_O, NULL};

/* cache[id] = value, for as long as *target* lives. */
static int
remember(PyObject *cache, PyObject *target, PyObject *id, PyObject *value)
{
    if (forget_func == NULL) {
        forget_func = PyCFunction_New(&forget_def, NULL);
        if (forget_func == NULL)
            return -1;
    }
    PyObject *ref = PyWeakref_NewRef(target, forget_func);
    PyObject *ref_id = ref ? PyLong_FromVoidPtr(ref) : NULL;
    PyObject *info = ref_id ? PyTuple_Pack(3, cache, id, ref) : NULL;
    int rc = info ? PyDict_SetItem(cache_refs, ref_id, info) : -1;
    if (rc == 0)
        rc = PyDict_SetItem(cache, id, value);
    Py_XDECREF(ref);
    Py_XDECREF(ref_id);
    Py_XDECREF(info);
    return rc;
}

static PyObject *
prepare(PyObject *target, PyObject *name)
{
    if (module_cache == NULL) {
        module_cache = PyDict_New();
        class_cache = PyDict_New();
        cache_refs = PyDict_New();
        if (module_cache == NULL || class_cache == NULL || cache_refs == NULL)
            return NULL;
    }
    PyObject *id = PyLong_FromVoidPtr(target);
    if (id == NULL)
        return NULL;
    PyObject *result = NULL;
    if (PyModule_Check(target)) {
        /* (the private subclass, the ContextVar the slots read) */
        PyTypeObject *base = own_class(target);
        PyObject *cached = PyDict_GetItemWithError(module_cache, id);
        if (cached == NULL && PyErr_Occurred())
            goto done;
        Py_XINCREF(cached);
        if (cached == NULL || ((PyTypeObject *)PyTuple_GET_ITEM(cached, 0))->tp_base != base) {
            PyObject *var = shared_var();
            Py_XDECREF(cached);
            PyObject *sub = var ? module_class(base) : NULL;
            cached = sub ? PyTuple_Pack(2, sub, var) : NULL;
            Py_XDECREF(sub);
            Py_XDECREF(var);
            if (cached == NULL || remember(module_cache, target, id, cached) < 0) {
                Py_XDECREF(cached);
                goto done;
            }
        }
        PyObject *sub = PyTuple_GET_ITEM(cached, 0), *var = PyTuple_GET_ITEM(cached, 1);
        PyObject *d = own_dict(sub);
        PyObject *slot = d ? dict_get(d, name) : NULL;
        Py_XDECREF(d);
        if (slot != NULL && Py_TYPE(slot) != &ModuleSlotType) {
            Py_SETREF(slot, PyObject_CallFunctionObjArgs((PyObject *)&ModuleSlotType, target,
                                                         name, sub, var, NULL));
            if (slot != NULL && PyObject_SetAttr(sub, name, slot) < 0)
                Py_CLEAR(slot);
        }
        Py_DECREF(cached);
        result = slot;
        goto done;
    }
    if (!PyType_Check(target)) {
        PyErr_SetString(PyExc_TypeError, "patchscope: context slots are for modules and classes");
        goto done;
    }
    /* ({name: (ClassSlot, DataClassSlot)}, the ContextVar the slots read) */
    PyObject *cached = PyDict_GetItemWithError(class_cache, id);
    if (cached == NULL) {
        if (PyErr_Occurred())
            goto done;
        PyObject *var = shared_var();
        PyObject *d = var ? PyDict_New() : NULL;
        cached = d ? PyTuple_Pack(2, d, var) : NULL;
        Py_XDECREF(d);
        Py_XDECREF(var);
        if (cached == NULL || remember(class_cache, target, id, cached) < 0) {
            Py_XDECREF(cached);
            goto done;
        }
    }
    else {
        Py_INCREF(cached);
    }
    PyObject *slots = PyTuple_GET_ITEM(cached, 0), *var = PyTuple_GET_ITEM(cached, 1);
    Py_INCREF(slots);
    PyObject *pair = PyDict_GetItemWithError(slots, name);
    if (pair != NULL) {
        Py_INCREF(pair);
    }
    else if (!PyErr_Occurred()) {
        PyObject *plain = PyObject_CallFunctionObjArgs((PyObject *)&ClassSlotType, target, name,
                                                       var, NULL);
        PyObject *data = plain ? PyObject_CallFunctionObjArgs((PyObject *)&DataClassSlotType,
                                                              target, name, var, NULL)
                               : NULL;
        pair = data ? PyTuple_Pack(2, plain, data) : NULL;
        Py_XDECREF(plain);
        Py_XDECREF(data);
        if (pair != NULL && PyDict_SetItem(slots, name, pair) < 0)
            Py_CLEAR(pair);
    }
    Py_DECREF(slots);
    Py_DECREF(cached);
    result = pair;
done:
    Py_DECREF(id);
    return result;
}

PyObject *
py_prepare(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "prepare(target, name)");
        return NULL;
    }
    return prepare(args[0], args[1]);
}

/* ------------------------------------------------------------------------ */
/* putting slots in place (twins of _slots.install, uninstall, displaced) */

int
our_type(PyObject *raw)
{
    PyTypeObject *tp = Py_TYPE(raw);
    return tp == &ClassSlotType || tp == &DataClassSlotType || tp == &PyStaticMethod_Type;
}

PyObject *
displaced(PyObject *raw)
{
    PyTypeObject *tp = Py_TYPE(raw);
    if (tp == &ClassSlotType || tp == &DataClassSlotType)
        return ((ClassSlotObject *)raw)->displaced;
    if (tp == &PyStaticMethod_Type) {
        DispObject *disp = dispatcher_of(raw);
        return disp != NULL ? disp->displaced : raw;
    }
    return raw;
}

DispObject *
dispatcher_of(PyObject *raw)
{
    if (!PyObject_TypeCheck(raw, &PyStaticMethod_Type))
        return NULL;
    PyObject *func = PyObject_GetAttr(raw, s_func);
    if (func == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(func); /* the staticmethod keeps it alive */
    return Py_TYPE(func) == &DispType ? (DispObject *)func : NULL;
}

PyObject *
slot_var(PyObject *slot)
{
    PyTypeObject *tp = Py_TYPE(slot);
    if (tp == &ModuleSlotType)
        return ((ModuleSlotObject *)slot)->var;
    if (tp == &ClassSlotType || tp == &DataClassSlotType)
        return ((ClassSlotObject *)slot)->var;
    if (tp == &DispType)
        return ((DispObject *)slot)->var;
    if (slot != Py_None)
        return cfg.activations; /* a call dispatcher: it reads _slots.ACTIVATIONS too */
    return NULL;
}

PyObject *
inherited_new(PyTypeObject *cls)
{
    PyObject *mro = cls->tp_mro;
    for (Py_ssize_t i = 1; mro != NULL && i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *d = own_dict(PyTuple_GET_ITEM(mro, i));
        if (d == NULL)
            continue;
        PyObject *raw = PyDict_GetItemWithError(d, s_new);
        Py_DECREF(d);
        if (raw != NULL) {
            if (PyObject_TypeCheck(raw, &PyStaticMethod_Type)) {
                PyObject *func = PyObject_GetAttrString(raw, "__func__");
                Py_XDECREF(func); /* the staticmethod keeps it alive */
                return func;
            }
            return raw;
        }
        if (PyErr_Occurred())
            return NULL;
    }
    return object_new;
}

/* module.__class__ = to, between a module's class and its private subclass
 * (slot->owner). The first switch goes through object.__class__'s setter,
 * which checks the pair can be swapped; after that (the subclass adds no
 * fields) the type is swapped directly, as that setter does past its
 * checks, when the switch is between the subclass and its base. */
static int
switch_class(ModuleSlotObject *slot, PyObject *module, PyTypeObject *to)
{
    PyTypeObject *from = Py_TYPE(module);
    int pair = (PyObject *)to == slot->owner ? from == to->tp_base
                                             : (PyObject *)from == slot->owner && from->tp_base == to;
    if (!slot->checked || !pair) {
        if (PyObject_SetAttr(module, s_class, (PyObject *)to) < 0)
            return -1;
        slot->checked = pair;
        return 0;
    }
    if (to->tp_flags & Py_TPFLAGS_HEAPTYPE)
        Py_INCREF(to);
    Py_SET_TYPE(module, to);
    if (from->tp_flags & Py_TPFLAGS_HEAPTYPE)
        Py_DECREF(from);
    return 0;
}

/* The module's record in the swap table, [own class, private subclass,
 * names with a slot on it] (a new reference), made if there is none and
 * *create*; NULL with no error where there is none. The table keeps a
 * record while the module lives (forget() takes it out), so the slot keeps
 * the one it found. */
static PyObject *
swap_record(ModuleSlotObject *slot, PyObject *module, int create)
{
    PyObject *swap = slot->swap;
    if (swap != NULL && PyDict_GetItemWithError(cfg.swaps, slot->module_id) == swap) {
        Py_INCREF(swap);
        return swap;
    }
    if (PyErr_Occurred())
        return NULL;
    swap = PyDict_GetItemWithError(cfg.swaps, slot->module_id);
    if (swap != NULL) {
        Py_INCREF(swap);
    }
    else {
        if (PyErr_Occurred() || !create)
            return NULL;
        PyObject *names = PySet_New(NULL);
        swap = names ? Py_BuildValue("[OON]", (PyObject *)own_class(module), slot->owner, names)
                     : NULL;
        if (swap != NULL && PyDict_SetItem(cfg.swaps, slot->module_id, swap) < 0)
            Py_CLEAR(swap);
        if (swap == NULL)
            return NULL;
    }
    set_field(&slot->swap, swap);
    return swap;
}

PyObject *
slot_install(EntryObject *entry, ActObject *act, PyObject *value)
{
    PyObject *target = entry->target, *name = entry->name;
    /* prepare(target, name), kept on the redirect for its next activation
     * (twin of _slots._prepared). */
    RCoreObject *redirect = (RCoreObject *)act->redirect;
    PyObject *prepared = redirect->prepared;
    int fits = 0;
    if (prepared != Py_None) {
        if (PyModule_Check(target))
            fits = Py_TYPE(prepared) == &ModuleSlotType &&
                   ((ModuleSlotObject *)prepared)->dict == PyModule_GetDict(target);
        else if (PyTuple_Check(prepared) && PyTuple_GET_SIZE(prepared) == 2) {
            PyObject *cls = get_ref(((ClassSlotObject *)PyTuple_GET_ITEM(prepared, 0))->cls_ref);
            fits = cls == target;
            Py_DECREF(cls);
        }
    }
    if (fits) {
        Py_INCREF(prepared);
    }
    else {
        prepared = prepare(target, name);
        if (prepared == NULL)
            return NULL;
        set_field(&redirect->prepared, prepared);
    }
    if (PyModule_Check(target)) {
        ModuleSlotObject *slot = (ModuleSlotObject *)prepared;
        set_field(&entry->slot, prepared);
        Py_DECREF(prepared); /* entry->slot keeps it */
        PyObject *swap = swap_record(slot, target, 1);
        if (swap == NULL)
            return NULL;
        int rc = 0;
        if (PySet_GET_SIZE(PyList_GET_ITEM(swap, 2)) == 0) {
            /* Not switched now: (re)start the record from the module's class. */
            PyTypeObject *base = own_class(target);
            if (((PyTypeObject *)slot->owner)->tp_base != base) {
                /* The module's class changed since the slot was made. */
                PyObject *sub = module_class(base);
                if (sub == NULL)
                    goto fail;
                set_field(&slot->owner, sub);
                Py_DECREF(sub);
                slot->checked = 0;
            }
            Py_INCREF(base);
            Py_INCREF(slot->owner);
            if (PyList_SetItem(swap, 0, (PyObject *)base) < 0 ||
                PyList_SetItem(swap, 1, slot->owner) < 0)
                goto fail;
        }
        PyObject *sub = PyList_GET_ITEM(swap, 1);
        PyObject *d = own_dict(sub);
        PyObject *there = d ? dict_get(d, name) : NULL;
        Py_XDECREF(d);
        rc = there == NULL ? -1 : there != prepared ? PyObject_SetAttr(sub, name, prepared) : 0;
        Py_XDECREF(there);
        if (rc == 0)
            rc = PySet_Add(PyList_GET_ITEM(swap, 2), name);
        sub = PyList_GET_ITEM(swap, 1);
        /* From its class, or a private subclass of it left by a fault; a
         * class somebody else gave it meanwhile stays. */
        if (rc == 0 && (PyObject *)Py_TYPE(target) != sub &&
            (PyObject *)own_class(target) == PyList_GET_ITEM(swap, 0)) {
            Py_INCREF(sub);
            rc = switch_class(slot, target, (PyTypeObject *)sub);
            Py_DECREF(sub);
        }
        Py_DECREF(swap);
        return rc < 0 ? NULL : (PyObject *)slot;
    fail:
        Py_DECREF(swap);
        return NULL;
    }
    PyObject *raw = value != ABSENT ? value : lookup_mro((PyTypeObject *)target, name);
    /* Data descriptors (properties with setters, __slots__ members) keep
     * their precedence and their setter in every other context. */
    PyObject *slot = PyTuple_GET_ITEM(prepared, is_data_descriptor(raw) ? 1 : 0);
    set_field(&((ClassSlotObject *)slot)->fallback, value);
    set_field(&((ClassSlotObject *)slot)->displaced,
              entry->kind == OWN ? entry->original : ABSENT);
    set_field(&entry->slot, slot);
    Py_DECREF(prepared); /* entry->slot keeps the slot */
    return slot;
}

/* _forget_class_slots: drop the cached pair *slot* belongs to (the class's
 * ContextVar stays cached). */
static int
forget_class_slots(PyObject *cls, PyObject *name, PyObject *slot)
{
    if (class_cache == NULL)
        return 0;
    PyObject *id = PyLong_FromVoidPtr(cls);
    if (id == NULL)
        return -1;
    PyObject *cached = PyDict_GetItemWithError(class_cache, id);
    Py_DECREF(id);
    if (cached == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *slots = PyTuple_GET_ITEM(cached, 0);
    PyObject *pair = PyDict_GetItemWithError(slots, name);
    if (pair == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (PyTuple_GET_ITEM(pair, 0) == slot || PyTuple_GET_ITEM(pair, 1) == slot)
        return PyDict_DelItem(slots, name);
    return 0;
}

int
slot_uninstall(EntryObject *entry)
{
    PyObject *target = entry->target;
    if (PyModule_Check(target) && Py_TYPE(entry->slot) == &ModuleSlotType) {
        ModuleSlotObject *slot = (ModuleSlotObject *)entry->slot;
        PyObject *swap = swap_record(slot, target, 0);
        if (swap == NULL && PyErr_Occurred())
            return -1;
        if (swap != NULL) {
            PyObject *names = PyList_GET_ITEM(swap, 2);
            int rc = PySet_Discard(names, entry->name);
            if (rc >= 0 && PySet_GET_SIZE(names) == 0) {
                PyObject *base = PyList_GET_ITEM(swap, 0);
                Py_INCREF(base);
                if ((PyObject *)Py_TYPE(target) != base && is_private_class(Py_TYPE(target)))
                    rc = switch_class(slot, target, (PyTypeObject *)base); /* only from ours */
                Py_DECREF(base);
            }
            Py_DECREF(swap);
            if (rc < 0)
                return -1;
        }
    }
    else if (PyType_Check(target) && (Py_TYPE(entry->slot) == &ClassSlotType ||
                                       Py_TYPE(entry->slot) == &DataClassSlotType)) {
        ClassSlotObject *slot = (ClassSlotObject *)entry->slot;
        set_field(&slot->displaced, ABSENT);
        /* Out of the cache: what it still holds (its fallback) goes with the
         * last reference to it. */
        if (forget_class_slots(target, entry->name, (PyObject *)slot) < 0)
            return -1;
    }
    set_field(&entry->slot, Py_None);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* module-level functions */

PyObject *
py_module_class(PyObject *module, PyObject *base)
{
    if (!PyType_Check(base) || !PyType_IsSubtype((PyTypeObject *)base, &PyModule_Type)) {
        PyErr_SetString(PyExc_TypeError, "module_class() takes a module type");
        return NULL;
    }
    return module_class((PyTypeObject *)base);
}

PyObject *
py_is_private_module_class(PyObject *module, PyObject *tp)
{
    return PyBool_FromLong(PyType_Check(tp) && is_private_class((PyTypeObject *)tp));
}
