/* patchscope._speedups: the C twins of a named set of patchscope's types and
 * functions.
 *
 * The contract. Each item has a Python twin with the same signature, which
 * is the reference and what runs without this extension; patchscope/_accel.py
 * (twin(), twin_function()) is the one place that picks between them, and
 * configure() there hands this module the Python objects it works with. This
 * table lists every name the module exports and every Python function whose
 * rules C repeats:
 *
 *   file         C twin                                Python twin
 *   module.c     configure(**objects)                  (none: _accel.configure calls it)
 *   lock.c       RLock                                 threading.RLock
 *   records.c    ActivationBase, GroupBase             _handles._PyActivationBase, _PyGroupBase
 *                Entry                                 _entry._PyEntry
 *                RedirectCore, GroupCore               _redirect._PyRedirectCore, _PyGroupCore
 *   slots.c      ModuleSlot, ClassSlot, DataClassSlot  _slots._PyModuleSlot, ...
 *                Dispatcher                            _slots._PyDispatcher
 *                module_class, is_private_module_class _slots._py_module_class, ...
 *                prepare                               _slots._py_prepare
 *   registry.c   enter(act, target), exit(act),        _registry._py_enter, _py_exit,
 *                ActivationBase.stop, GroupBase.stop   _PyActivationBase.stop, _PyGroupBase.stop
 *   redirect.c   RedirectCore._c_activate/_c_with_enter/_c_with_exit
 *                                                      _redirect._py_activate, _py_with_enter, ...
 *                GroupCore._c_activate/_c_with_enter/_c_with_exit
 *                                                      _redirect._py_activate, ... (both kinds)
 *                AttrFactory(reference, ...)           _redirect.redirect_attr (the reference)
 *   decorate.c   Guard, CallWrapper                    _decorate._PyGuard, _PyCallWrapper
 *   call.c       CallDispatcherBase (its choose(),     _call._PyCallDispatcherBase
 *                active(body))
 *   cpython.c    preset_new, repair_new                _cpython._py_preset_new, _py_repair_new
 *   snapshot.c   same_namespace                        testing._snapshot._py_same_namespace
 *
 *   Rules C repeats so that the operations above never step back into
 *   Python (a Python-level step is where a signal handler runs):
 *   entry.c      capture, show, process_value          _entry.capture, show
 *   registry.c   enter_locked, exit_locked, after_all, _registry.enter_locked, exit_locked,
 *                update_vars                           after_all, update_vars
 *                stop_handle_locked, group_stop        _handles.stop_handle_locked,
 *                                                      _PyGroupBase.stop
 *                after_undo                            _registry.after_undo
 *   redirect.c   activate_locked, undo_locked          _redirect.activate_locked,
 *                                                      _registry.undo_locked
 *   pairing.c    pair_enter, pair_exit, pair_push      _pairing.pair_enter, pair_exit, push
 *   redirect.c   check_name (in AttrFactory)           _resolve.check_name
 *   resolve.c    lookup_mro, is_data_descriptor,       _resolve.lookup_mro, is_data_descriptor,
 *                describe                              describe
 *
 * Keep each in sync with its Python twin: tests/test_parity.py drives the
 * real pure-Python package and this build side by side and compares
 * everything observable.
 *
 * The C code never looks up a Python module's globals or private names:
 * what it needs from Python (the handle classes it creates, the registry's
 * table and lock, the exceptions it raises) it is given once, by keyword,
 * through configure() (module.c), and it calls no Python function of the
 * package. The operations (enter, exit, the with and group methods) run
 * from start to end without a Python-level step of their own, so no signal
 * handler runs half way through them: Ctrl-C lands before or after. The
 * only Python code they run is the target's own (its setattr, a module
 * __getattr__ while capturing an original), and what fails there is undone.
 */
#ifndef PATCHSCOPE_SPEEDUPS_H
#define PATCHSCOPE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <frameobject.h>

/* The module's own functions stay inside it: none is called from outside,
 * and none may be resolved to a same-named C library function. */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Dict operations with a hash computed once: exported by CPython 3.10 and
 * later (declared outside the public headers since 3.13). */
#if PY_VERSION_HEX >= 0x030D0000
PyAPI_FUNC(int) _PyDict_SetItem_KnownHash(PyObject *mp, PyObject *key, PyObject *item,
                                          Py_hash_t hash);
PyAPI_FUNC(int) _PyDict_DelItem_KnownHash(PyObject *mp, PyObject *key, Py_hash_t hash);
#endif

/* How an attribute is restored (keep in sync with _resolve.OWN, ...). */
#define OWN 0
#define SHADOW 1
#define SETATTR 2

/* ------------------------------------------------------------------------ */
/* records */

/* The fields every handle starts with, so pairing treats both kinds alike. */
#define HANDLE_HEAD                                                                    \
    PyObject_HEAD                                                                      \
    PyObject *weakrefs;                                                                \
    PyObject *frame;        /* _frame: the with-statement's frame while paired */      \
    unsigned long thread_id;                                                           \
    char pushed;            /* _pushed: on the context's with-stack */

typedef struct {
    HANDLE_HEAD
} HandleObject;

typedef struct {
    HANDLE_HEAD
    PyObject *redirect; /* _redirect */
    PyObject *value;    /* _value: what the registry installs */
    PyObject *entry;    /* _entry: the registry entry once registered, else None */
    PyObject *code;     /* _code: where it was entered */
    PyObject *slot;     /* _slot: what holds this context's activations, or None */
    int lasti;          /* _lasti */
    char open;
    char ctx;           /* _ctx */
} ActObject;

typedef struct {
    HANDLE_HEAD
    PyObject *parts; /* _parts: a list of handles */
    PyObject *value;
} GroupHandleObject;

typedef struct {
    PyObject_HEAD
    PyObject *target, *name, *key, *original, *installed, *stack, *slot;
    int kind;
    Py_hash_t key_hash; /* tuples do not cache their hash */
} EntryObject;

typedef struct {
    PyObject_HEAD
    PyObject *weakrefs;
    PyObject *handles, *key, *target, *name, *value, *replacement, *scope;
    PyObject *slot, *spec, *spare, *prepared;
    PyObject *hashed_key; /* the key key_hash belongs to (Python code may set _key) */
    Py_hash_t key_hash;
    char ctx, create;
} RCoreObject;

/* The hash of a redirect's key, computed once per key. */
Py_hash_t redirect_key_hash(RCoreObject *redirect);

typedef struct {
    PyObject_HEAD
    PyObject *weakrefs;
    PyObject *handles, *parts, *value;
} GCoreObject;

extern PyTypeObject ActType, GroupHandleType, EntryType, RCoreType, GCoreType;
extern PyTypeObject CallDispType; /* call.c */

/* Type checks that look at the direct base first: the handle and redirect
 * classes are direct subclasses of these records. */
#define IS_OF(ob, tp)                                                                  \
    (Py_TYPE(ob) == (tp) || Py_TYPE(ob)->tp_base == (tp) ||                            \
     (Py_TYPE(ob)->tp_base != NULL && Py_TYPE(ob)->tp_base->tp_base == (tp)) ||         \
     PyObject_TypeCheck(ob, tp))
#define IS_ACT(ob) IS_OF((PyObject *)(ob), &ActType)
#define IS_RCORE(ob) IS_OF((PyObject *)(ob), &RCoreType)
#define IS_GCORE(ob) IS_OF((PyObject *)(ob), &GCoreType)

/* ------------------------------------------------------------------------ */
/* slots */

typedef struct {
    PyObject_HEAD
    PyObject *dict, *name, *owner, *var;
    PyObject *module_id; /* C only: id(module), the key of its record in the swap table */
    PyObject *swap;      /* C only: that record, once found (checked against the table) */
    char checked;   /* C only: a switch to owner went through the checking setter */
} ModuleSlotObject;

typedef struct {
    PyObject_HEAD
    PyObject *cls_ref, *name, *fallback, *displaced, *var;
} ClassSlotObject;

typedef struct {
    PyObject_HEAD
    PyObject *cls_ref, *key, *var, *base, *entries, *rebuilders, *displaced, *dict;
    Py_hash_t key_hash;
    vectorcallfunc vectorcall;
} DispObject;

extern PyTypeObject ModuleSlotType, ClassSlotType, DataClassSlotType, DispType;

/* ------------------------------------------------------------------------ */
/* what configure() gives, and the module's own constants (module.c) */

typedef struct {
    int configured;
    PyObject *activation_type; /* _handles.Activation */
    PyObject *group_type;      /* _handles.ActivationGroup */
    PyObject *absent;          /* _resolve.ABSENT */
    PyObject *entries;         /* _registry.entries */
    PyObject *swaps;           /* _slots.module_swaps */
    PyObject *lock;            /* _registry.lock, an RLock of this module */
    PyObject *with_stack;      /* _pairing.with_stack */
    PyObject *enter_context;   /* _pairing.ENTER_CONTEXT */
    PyObject *new_standin;     /* _cpython.OBJECT_NEW_STANDIN */
    PyObject *core_modules;    /* _registry._CORE_MODULES */
    PyObject *conflict_warning, *restore_error, *not_writable_error, *missing_error,
        *unsupported_error;
    PyObject *activations;     /* _slots.ACTIVATIONS, the one ContextVar every slot reads */
} Config;

extern Config cfg;
extern PyObject *object_new;  /* vars(object)["__new__"] */
extern PyObject *object_init; /* vars(object)["__init__"] */
extern PyObject *object_setattr; /* vars(object)["__setattr__"] */
extern PyObject *empty_tuple;
extern PyObject *private_classes; /* id(sub) -> weakref(sub), made by module_class */
extern PyObject *s_new, *s_class, *s_dict, *s_name, *s_qualname, *s_module, *s_slots,
    *s_getattr, *s_setattr, *s_getattribute, *s_replacement, *s_include_subclasses, *s_process,
    *s_subclass_replacement, *s_base, *s_open, *s_value, *s_set, *s_delete, *s_func, *s_init;

#define ABSENT (cfg.absent)

/* ------------------------------------------------------------------------ */
/* lock.c */

typedef struct {
    PyObject_HEAD
    unsigned long owner;
    unsigned long count;
} LockObject;

extern PyTypeObject LockType;
/* Take the registry lock, waiting without the GIL. Entering passes
 * interruptible=1: a signal handler that raises gives up the wait, before
 * anything changed. Ending passes 0: handlers run once the operation is
 * over, so an exit never stops half way. 0, or -1 with an error. */
int lock_take(int interruptible);
void lock_give(void);

/* ------------------------------------------------------------------------ */
/* resolve.c */

PyObject *describe(PyObject *target);                   /* new reference */
PyObject *lookup_mro(PyTypeObject *tp, PyObject *name); /* borrowed, or ABSENT */
int is_data_descriptor(PyObject *value);
PyObject *bind_raw(PyObject *value, PyObject *instance, PyObject *owner); /* new */
PyObject *get_ref(PyObject *ref); /* the referent (new) or Py_None */
PyObject *own_dict(PyObject *target); /* new reference, or NULL (no error) */
/* The raw value of dict-like *d* for *name*: new reference, ABSENT, or NULL on error. */
PyObject *dict_get(PyObject *d, PyObject *name);
PyObject *target_key(PyObject *target, PyObject *name); /* (id(target), name) */

/* ------------------------------------------------------------------------ */
/* slots.c */

PyObject *module_class(PyTypeObject *base); /* new reference */
int is_private_class(PyTypeObject *tp);
PyTypeObject *own_class(PyObject *module); /* borrowed */
PyObject *displaced(PyObject *raw);        /* borrowed: what ours stands for, else raw */
int our_type(PyObject *raw);
PyObject *slot_install(EntryObject *entry, ActObject *act, PyObject *value); /* borrowed */
int slot_uninstall(EntryObject *entry);
PyObject *inherited_new(PyTypeObject *cls); /* borrowed */
PyObject *slot_var(PyObject *slot);         /* borrowed var of a slot or dispatcher */
DispObject *dispatcher_of(PyObject *raw);   /* borrowed: the Dispatcher a staticmethod wraps */

/* ------------------------------------------------------------------------ */
/* cpython.c */

int delete_new(PyTypeObject *cls);
PyObject *call_object_new(PyTypeObject *cls, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);
PyObject *py_preset_new(PyObject *module, PyObject *cls);
PyObject *py_module_class(PyObject *module, PyObject *base);
PyObject *py_prepare(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_is_private_module_class(PyObject *module, PyObject *tp);
PyObject *py_repair_new(PyObject *module, PyObject *cls);

/* ------------------------------------------------------------------------ */
/* snapshot.c */

PyObject *py_same_namespace(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* ------------------------------------------------------------------------ */
/* entry.c */

EntryObject *entry_new(PyObject *target, PyObject *name, PyObject *key, Py_hash_t hash,
                       int kind, PyObject *original, PyObject *installed);
int capture(PyObject *target, PyObject *name, int create, int *kind, PyObject **original,
            PyObject **installed);
/* 0 or -1; *conflict is a new reference to a conflicting value, or NULL. */
int show(EntryObject *entry, PyObject **conflict);

/* ------------------------------------------------------------------------ */
/* registry.c */

/* Results of ending one activation, for the work after the lock. */
typedef struct {
    ActObject *act;     /* a new reference */
    PyObject *conflict; /* new reference or NULL */
    PyObject *error;    /* new reference (exception) or NULL */
    int entered;
} Outcome;

/* A growing list of outcomes, on the stack until it needs more room. */
typedef struct {
    Outcome *items;
    Py_ssize_t n, cap;
    Outcome local[8];
} Outcomes;

#define OUTCOMES_INIT(o) ((o)->items = (o)->local, (o)->n = 0, (o)->cap = 8)

ActObject *act_new(PyObject *redirect, PyObject *value, PyObject *code, int lasti);
int enter_locked(ActObject *act, PyObject *target, PyObject **conflict);
void exit_locked(ActObject *act, PyObject **conflict, PyObject **error);
/* The work after the lock for each outcome (slot variables, warnings), then
 * the restore errors as one RestoreError; releases the outcomes. */
int after_all(Outcomes *outs, int group); /* also frees them */
/* After a failed entry was undone: the warnings of the conflicts its
 * activations met entering, then the pending error (or the first warning
 * raised as an error in its place); frees the outcomes. */
void after_undo(Outcomes *outs);
void outcomes_clear(Outcomes *outs);     /* releases the references, keeps the room */
void outcomes_free(Outcomes *outs);
int stop_handle_locked(PyObject *handle, Outcomes *outs);
/* after_all for stopped handles, then the error stop_handle_locked met (rc < 0), if any. */
PyObject *after_stop(Outcomes *outs, int group, int rc);
int outcome_add(Outcomes *outs, ActObject *act, int entered, PyObject *conflict, PyObject *error);
PyObject *handle_value(PyObject *handle); /* new reference */
PyObject *py_enter(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *py_exit(PyObject *module, PyObject *act);
PyObject *act_stop(PyObject *self, PyObject *unused);
PyObject *group_stop(PyObject *self, PyObject *unused);
PyObject *stop_any(PyObject *handle); /* stop() of either kind of handle */

/* ------------------------------------------------------------------------ */
/* pairing.c */

int pair_enter(PyObject *handles, PyObject *handle, PyObject *frame);
PyObject *pair_exit(PyObject *handles, PyObject *frame); /* new reference */
int pair_push(PyObject *handles, PyObject *handle);
int forget_node(PyObject *handles, PyObject *handle); /* off this context's with-stack */
PyObject *caller_frame(void); /* borrowed: the Python frame calling into C, or NULL */
PyObject *fetch_exc(void);       /* the raised exception (new reference), cleared */
void raise_exc(PyObject *exc);   /* raise it again (steals the reference) */

/* ------------------------------------------------------------------------ */
/* redirect.c */

PyObject *activate_any(PyObject *redirect, PyObject *code, int lasti); /* new handle */
int entry_signals(void);
/* End *handle* (paired in *handles*, or NULL) after the work following its
 * entry raised: nothing it entered stays installed; that error is raised again. */
void undo_entered(PyObject *handle, PyObject *handles);
extern PyMethodDef rcore_methods[], gcore_methods[];
PyObject *rcore_new_attr(PyObject *cls, PyObject *const *args, Py_ssize_t nargs);

/* ------------------------------------------------------------------------ */
/* decorate.c */

extern PyTypeObject GuardType, CallWrapperType, FactoryType;

/* ------------------------------------------------------------------------ */
/* small helpers */

#define REQUIRE_CONFIGURED(fail)                                                       \
    if (!cfg.configured) {                                                             \
        PyErr_SetString(PyExc_RuntimeError,                                            \
                        "patchscope._speedups is used through patchscope only");       \
        return fail;                                                                   \
    }

static inline void
set_field(PyObject **field, PyObject *value)
{
    PyObject *old = *field;
    Py_INCREF(value);
    *field = value;
    Py_XDECREF(old);
}

int refuse_delete(PyObject *self, PyObject *name, PyObject *value);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif
#endif
