/* patchscope._speedups: the module, and configure(), the one way it is
 * given what it needs from Python (see speedups.h for the contract). */
#include "speedups.h"

Config cfg;
PyObject *object_new, *object_init, *object_setattr, *empty_tuple, *private_classes;
PyObject *s_new, *s_class, *s_dict, *s_name, *s_qualname, *s_module, *s_slots, *s_getattr, *s_setattr,
    *s_getattribute, *s_replacement, *s_include_subclasses, *s_process, *s_subclass_replacement,
    *s_base, *s_open, *s_value, *s_set, *s_delete, *s_func, *s_init;

static PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"activation_type",
                            "group_type",
                            "absent",
                            "entries",
                            "swaps",
                            "lock",
                            "with_stack",
                            "enter_context",
                            "new_standin",
                            "core_modules",
                            "conflict_warning",
                            "restore_error",
                            "not_writable_error",
                            "missing_error",
                            "unsupported_error",
                            "activations",
                            NULL};
    Config c = {0};
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "$O!O!OO!O!O!O!O!OO!O!O!O!O!O!O!:configure", names, &PyType_Type,
            &c.activation_type, &PyType_Type, &c.group_type, &c.absent, &PyDict_Type, &c.entries,
            &PyDict_Type, &c.swaps, &LockType, &c.lock, &PyContextVar_Type, &c.with_stack,
            &PyCode_Type, &c.enter_context, &c.new_standin, &PyFrozenSet_Type, &c.core_modules,
            &PyType_Type, &c.conflict_warning, &PyType_Type, &c.restore_error, &PyType_Type,
            &c.not_writable_error, &PyType_Type, &c.missing_error, &PyType_Type,
            &c.unsupported_error, &PyContextVar_Type, &c.activations))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)c.activation_type, &ActType) ||
        ((PyTypeObject *)c.activation_type)->tp_basicsize != ActType.tp_basicsize ||
        !PyType_IsSubtype((PyTypeObject *)c.group_type, &GroupHandleType) ||
        ((PyTypeObject *)c.group_type)->tp_basicsize != GroupHandleType.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError,
                        "configure(): the handle classes must add no fields to the records");
        return NULL;
    }
    PyObject **fields[] = {&cfg.activation_type,  &cfg.group_type,       &cfg.absent,
                           &cfg.entries,          &cfg.swaps,            &cfg.lock,
                           &cfg.with_stack,       &cfg.enter_context,    &cfg.new_standin,
                           &cfg.core_modules,     &cfg.conflict_warning, &cfg.restore_error,
                           &cfg.not_writable_error, &cfg.missing_error,  &cfg.unsupported_error,
                           &cfg.activations};
    PyObject *values[] = {c.activation_type,  c.group_type,       c.absent,
                          c.entries,          c.swaps,            c.lock,
                          c.with_stack,       c.enter_context,    c.new_standin,
                          c.core_modules,     c.conflict_warning, c.restore_error,
                          c.not_writable_error, c.missing_error,  c.unsupported_error,
                          c.activations};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*fields[i], values[i]);
    }
    cfg.configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, activation_type, group_type, absent, entries, swaps, lock, with_stack, "
     "enter_context, new_standin, core_modules, conflict_warning, restore_error, "
     "not_writable_error, missing_error, unsupported_error, activations): what the C twins need from "
     "Python, given once by patchscope._handles."},
    {"enter", (PyCFunction)(void (*)(void))py_enter, METH_FASTCALL,
     "enter(act, target): twin of _registry._py_enter."},
    {"exit", (PyCFunction)py_exit, METH_O, "exit(act): twin of _registry._py_exit."},
    {"module_class", (PyCFunction)py_module_class, METH_O,
     "module_class(base): twin of _slots._py_module_class."},
    {"is_private_module_class", (PyCFunction)py_is_private_module_class, METH_O,
     "is_private_module_class(tp): twin of _slots._py_is_private_module_class."},
    {"prepare", (PyCFunction)(void (*)(void))py_prepare, METH_FASTCALL,
     "prepare(target, name): twin of _slots._py_prepare."},
    {"preset_new", (PyCFunction)py_preset_new, METH_O, "Twin of _cpython.preset_new."},
    {"repair_new", (PyCFunction)py_repair_new, METH_O, "Twin of _cpython.repair_new."},
    {"same_namespace", (PyCFunction)(void (*)(void))py_same_namespace, METH_FASTCALL,
     "same_namespace(current, saved, names): twin of testing._snapshot._py_same_namespace."},
    {NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "patchscope._speedups",
    "C twins of patchscope's registry records and operations (see speedups.h).", -1,
    module_methods,
};

static int
intern(PyObject **slot, const char *text)
{
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } strings[] = {
        {&s_new, "__new__"},
        {&s_class, "__class__"},
        {&s_dict, "__dict__"},
        {&s_name, "__name__"},
        {&s_qualname, "__qualname__"},
        {&s_module, "__module__"},
        {&s_slots, "__slots__"},
        {&s_getattr, "__getattr__"},
        {&s_setattr, "__setattr__"},
        {&s_getattribute, "__getattribute__"},
        {&s_replacement, "replacement"},
        {&s_include_subclasses, "include_subclasses"},
        {&s_process, "process"},
        {&s_subclass_replacement, "subclass_replacement"},
        {&s_base, "base"},
        {&s_open, "open"},
        {&s_value, "_value"},
        {&s_set, "__set__"},
        {&s_delete, "__delete__"},
        {&s_func, "__func__"},
        {&s_init, "__init__"},
    };
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
        if (intern(strings[i].slot, strings[i].text) < 0)
            return NULL;
    empty_tuple = PyTuple_New(0);
    private_classes = PyDict_New();
    PyObject *object_dict = PyObject_GetAttrString((PyObject *)&PyBaseObject_Type, "__dict__");
    if (empty_tuple == NULL || private_classes == NULL || object_dict == NULL)
        return NULL;
    object_new = PyObject_GetItem(object_dict, s_new);
    object_init = PyObject_GetItem(object_dict, s_init);
    object_setattr = PyObject_GetItem(object_dict, s_setattr);
    Py_DECREF(object_dict);
    if (object_new == NULL || object_init == NULL || object_setattr == NULL)
        return NULL;
    /* Until configure() runs, ABSENT is a placeholder the records start with. */
    cfg.absent = Py_None;
    Py_INCREF(Py_None);

    DataClassSlotType.tp_base = &ClassSlotType;
    PyTypeObject *types[] = {&LockType,      &ActType,           &GroupHandleType,
                             &EntryType,     &RCoreType,         &GCoreType,
                             &ModuleSlotType, &ClassSlotType,    &DataClassSlotType,
                             &DispType,      &GuardType,         &CallWrapperType,
                             &FactoryType,   &CallDispType};
    const char *names[] = {"RLock",      "ActivationBase", "GroupBase",     "Entry",
                           "RedirectCore", "GroupCore",    "ModuleSlot",    "ClassSlot",
                           "DataClassSlot", "Dispatcher",  "Guard",         "CallWrapper",
                           "AttrFactory",  "CallDispatcherBase"};
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (PyType_Ready(types[i]) < 0)
            goto fail;
        Py_INCREF(types[i]);
        if (PyModule_AddObject(module, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            goto fail;
        }
    }
    return module;
fail:
    Py_DECREF(module);
    return NULL;
}
