/* Entering and ending activations: twins of _registry.enter_locked,
 * _registry.exit_locked, _registry.after_all (with update_vars),
 * _registry._py_enter/_py_exit, _handles.stop_handle_locked and
 * _handles._PyGroupBase.stop (as ActivationBase.stop and GroupBase.stop).
 * Keep in sync. The order is the reference's: an activation is registered before
 * the target changes and unregistered after it changed back. */
#include "speedups.h"

PyObject *
fetch_exc(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    if (type == NULL)
        return NULL;
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(value, tb);
        Py_DECREF(tb);
    }
    Py_DECREF(type);
    return value;
#endif
}

void
raise_exc(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyObject *type = (PyObject *)Py_TYPE(exc);
    Py_INCREF(type);
    PyErr_Restore(type, exc, PyException_GetTraceback(exc));
#endif
}

/* Raise *cls(msg)* from *cause* (stolen). */
static void
raise_from(PyObject *cls, PyObject *msg, PyObject *cause)
{
    PyObject *exc = msg ? PyObject_CallOneArg(cls, msg) : NULL;
    if (exc == NULL) {
        Py_XDECREF(cause);
        return;
    }
    if (cause != NULL) {
        Py_INCREF(cause);
        PyException_SetContext(exc, cause);
        PyException_SetCause(exc, cause);
    }
    raise_exc(exc);
}

/* "TypeError: message", as the Python twin's f"{type(exc).__name__}: {exc}". */
static PyObject *
exc_text(PyObject *exc)
{
    PyObject *tpname = PyObject_GetAttr((PyObject *)Py_TYPE(exc), s_name);
    PyObject *text = tpname ? PyUnicode_FromFormat("%U: %S", tpname, exc) : NULL;
    Py_XDECREF(tpname);
    return text;
}

static void
unregister(ActObject *act)
{
    act->open = 0;
    EntryObject *entry = (EntryObject *)act->entry;
    Py_INCREF(entry);
    PyObject *stack = entry->stack;
    for (Py_ssize_t i = PyList_GET_SIZE(stack) - 1; i >= 0; i--) {
        if (PyList_GET_ITEM(stack, i) == (PyObject *)act) {
            PyList_SetSlice(stack, i, i + 1, NULL);
            break;
        }
    }
    if (PyList_GET_SIZE(stack) == 0) {
        PyObject *there = _PyDict_GetItem_KnownHash(cfg.entries, entry->key, entry->key_hash);
        if (there == (PyObject *)entry &&
            _PyDict_DelItem_KnownHash(cfg.entries, entry->key, entry->key_hash) < 0)
            PyErr_Clear(); /* a key of ours, found just now */
    }
    Py_DECREF(entry);
}

int
enter_locked(ActObject *act, PyObject *target, PyObject **conflict)
{
    *conflict = NULL;
    RCoreObject *redirect = (RCoreObject *)act->redirect;
    PyObject *name = redirect->name;
    PyObject *key;
    Py_hash_t hash;
    if (redirect->key == Py_None || target != redirect->target) {
        key = target_key(target, name);
        if (key == NULL)
            return -1;
        hash = PyObject_Hash(key);
    }
    else {
        key = redirect->key;
        Py_INCREF(key);
        hash = redirect_key_hash(redirect);
    }
    if (hash == -1)
        goto error;
    PyObject *entry = _PyDict_GetItem_KnownHash(cfg.entries, key, hash);
    if (entry == NULL && PyErr_Occurred())
        goto error;
    if (entry != NULL && PyObject_TypeCheck(entry, &EntryType) &&
        PyList_GET_SIZE(((EntryObject *)entry)->stack) == 0) {
        /* Left empty by an exit that did not finish (an interrupted pure-Python
         * one): finish it, then start afresh. */
        Py_INCREF(entry);
        if (((EntryObject *)entry)->slot != Py_None) {
            PyObject *ignored = NULL;
            int rc = show((EntryObject *)entry, &ignored);
            Py_XDECREF(ignored);
            if (rc < 0) {
                Py_DECREF(entry);
                goto error;
            }
        }
        if (_PyDict_GetItem_KnownHash(cfg.entries, key, hash) == entry &&
            _PyDict_DelItem_KnownHash(cfg.entries, key, hash) < 0) {
            Py_DECREF(entry);
            goto error;
        }
        Py_DECREF(entry);
        entry = NULL;
    }
    int fresh = entry == NULL;
    if (fresh) {
        int kind;
        PyObject *original, *installed;
        if (capture(target, name, redirect->create, &kind, &original, &installed) < 0)
            goto error;
        EntryObject *spare = (EntryObject *)redirect->spare;
        if (redirect->key != Py_None && spare != (EntryObject *)Py_None && spare->target == target &&
            PyList_GET_SIZE(spare->stack) == 0 && spare->slot == Py_None) {
            /* The entry of this redirect's last activation (see exit_locked). */
            entry = (PyObject *)spare;
            Py_INCREF(entry);
            set_field(&redirect->spare, Py_None);
            spare->kind = kind;
            Py_SETREF(spare->original, original);
            Py_SETREF(spare->installed, installed);
        }
        else {
            entry = (PyObject *)entry_new(target, name, key, hash, kind, original, installed);
            Py_DECREF(original);
            Py_DECREF(installed);
            if (entry == NULL)
                goto error;
        }
    }
    else {
        if (!PyObject_TypeCheck(entry, &EntryType)) {
            PyErr_SetString(PyExc_TypeError, "patchscope: the registry holds something else");
            goto error;
        }
        Py_INCREF(entry);
    }
    if (act->ctx && (!(PyModule_Check(target) || PyType_Check(target)) ||
                     ((EntryObject *)entry)->kind == SETATTR)) {
        PyObject *shown = describe(target);
        if (shown != NULL) {
            PyErr_Format(cfg.unsupported_error,
                         "cannot redirect attribute %R of %U with scope='context': "
                         "context-local redirects work on module and class attributes stored "
                         "in __dict__; redirect the class attribute instead, or use "
                         "scope='process'",
                         name, shown);
            Py_DECREF(shown);
        }
        Py_DECREF(entry);
        goto error;
    }
    if (redirect->spec != Py_None) {
        /* What the dispatcher stands in place of while it is on the class. */
        DispObject *disp = dispatcher_of(redirect->value);
        if (disp != NULL)
            set_field(&disp->displaced, ((EntryObject *)entry)->kind == OWN
                                            ? ((EntryObject *)entry)->original
                                            : ABSENT);
    }
    /* Registered first: the registry lists whatever may be installed. */
    if (fresh && _PyDict_SetItem_KnownHash(cfg.entries, key, entry, hash) < 0) {
        Py_DECREF(entry);
        goto error;
    }
    set_field(&act->entry, entry);
    if (PyList_Append(((EntryObject *)entry)->stack, (PyObject *)act) < 0) {
        act->open = 0;
        unregister(act);
        Py_DECREF(entry);
        goto error;
    }
    act->open = 1;
    if (show((EntryObject *)entry, conflict) < 0) {
        PyObject *exc = fetch_exc();
        unregister(act);
        PyObject *ignored = NULL;
        if (show((EntryObject *)entry, &ignored) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_Exception)) {
                Py_XDECREF(exc); /* KeyboardInterrupt and the like go on */
                Py_DECREF(entry);
                goto error;
            }
            PyErr_Clear(); /* the target refuses writes; nothing of ours got in */
        }
        Py_XDECREF(ignored);
        if (exc != NULL && !PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_Exception)) {
            /* KeyboardInterrupt, SystemExit ... from the target's setattr: undone. */
            raise_exc(exc);
            Py_DECREF(entry);
            goto error;
        }
        PyObject *shown = describe(target);
        PyObject *why = shown && exc ? exc_text(exc) : NULL;
        PyObject *msg = shown && why ? PyUnicode_FromFormat(
                                           "cannot redirect attribute %R of %U: the target "
                                           "refuses the write (%U); redirect the attribute "
                                           "where it is defined or on an object that accepts "
                                           "writes",
                                           name, shown, why)
                                     : NULL;
        Py_XDECREF(shown);
        Py_XDECREF(why);
        raise_from(cfg.not_writable_error, msg, exc);
        Py_XDECREF(msg);
        Py_DECREF(entry);
        goto error;
    }
    if (act->ctx)
        set_field(&act->slot, ((EntryObject *)entry)->slot);
    Py_DECREF(entry);
    Py_DECREF(key);
    return 0;
error:
    Py_DECREF(key);
    return -1;
}

void
exit_locked(ActObject *act, PyObject **conflict, PyObject **error)
{
    *conflict = *error = NULL;
    if (act->entry == Py_None)
        return;
    EntryObject *entry = (EntryObject *)act->entry;
    PyObject *stack = entry->stack;
    int found = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(stack); i++)
        if (PyList_GET_ITEM(stack, i) == (PyObject *)act)
            found = 1;
    if (!found)
        return;
    act->open = 0; /* invisible in every context at once */
    Py_INCREF(entry);
    if (show(entry, conflict) < 0)
        *error = fetch_exc();
    unregister(act);
    RCoreObject *redirect = (RCoreObject *)act->redirect;
    if (*error == NULL && redirect->key != Py_None && PyList_GET_SIZE(entry->stack) == 0 &&
        entry->slot == Py_None && redirect->spare == Py_None) {
        /* Kept for the redirect's next first activation (twin of _entry.park),
         * without the values: that one captures them afresh. */
        set_field(&entry->original, ABSENT);
        set_field(&entry->installed, ABSENT);
        set_field(&redirect->spare, (PyObject *)entry);
    }
    if (redirect->spec != Py_None && PyList_GET_SIZE(entry->stack) == 0 && *error == NULL) {
        /* The dispatcher is off the class: it stands in place of nothing now. */
        DispObject *disp = dispatcher_of(redirect->value);
        if (disp != NULL)
            set_field(&disp->displaced, ABSENT);
    }
    Py_DECREF(entry);
}

/* ------------------------------------------------------------------------ */
/* after the lock */

int
outcome_add(Outcomes *outs, ActObject *act, int entered, PyObject *conflict, PyObject *error)
{
    if (outs->n == outs->cap) {
        Py_ssize_t more = outs->cap * 2;
        Outcome *grown = PyMem_Malloc(sizeof(Outcome) * (size_t)more);
        if (grown == NULL) {
            Py_XDECREF(conflict);
            Py_XDECREF(error);
            PyErr_NoMemory();
            return -1;
        }
        memcpy(grown, outs->items, sizeof(Outcome) * (size_t)outs->n);
        if (outs->items != outs->local)
            PyMem_Free(outs->items);
        outs->items = grown;
        outs->cap = more;
    }
    Py_INCREF(act);
    outs->items[outs->n++] = (Outcome){act, conflict, error, entered};
    return 0;
}

void
outcomes_clear(Outcomes *outs)
{
    for (Py_ssize_t i = 0; i < outs->n; i++) {
        Py_CLEAR(outs->items[i].act);
        Py_CLEAR(outs->items[i].conflict);
        Py_CLEAR(outs->items[i].error);
    }
    outs->n = 0;
}

void
outcomes_free(Outcomes *outs)
{
    outcomes_clear(outs);
    if (outs->items != outs->local)
        PyMem_Free(outs->items);
    OUTCOMES_INIT(outs);
}

/* This context's slot variables after the outcomes' activations began
 * (entered) or ended, one set per variable: every slot reads
 * _slots.ACTIVATIONS, so a group of context redirects sets it once. Twin of
 * _registry.update_vars. */
static int
update_vars(Outcome *outs, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *slot = outs[i].act->slot;
        PyObject *var = slot == Py_None ? NULL : slot_var(slot);
        if (var == NULL)
            continue;
        int seen = 0;
        for (Py_ssize_t j = 0; j < i && !seen; j++)
            seen = outs[j].act->slot != Py_None && slot_var(outs[j].act->slot) == var;
        if (seen)
            continue; /* done with the first outcome of this variable */
        PyObject *acts;
        if (PyContextVar_Get(var, empty_tuple, &acts) < 0)
            return -1;
        if (!PyTuple_Check(acts)) {
            Py_SETREF(acts, PyTuple_New(0));
            if (acts == NULL)
                return -1;
        }
        Py_ssize_t size = PyTuple_GET_SIZE(acts);
        int alone = i == n - 1 || outs[i + 1].act->slot == Py_None ||
                    slot_var(outs[i + 1].act->slot) != var;
        if (alone && n - i == 1 &&
            (size == 0 || (size == 1 && PyTuple_GET_ITEM(acts, 0) == (PyObject *)outs[i].act))) {
            /* The common cases: the first activation here, or the last ending. */
            Py_DECREF(acts);
            if (!outs[i].entered && size == 0)
                continue;
            PyObject *tuple = outs[i].entered ? PyTuple_Pack(1, (PyObject *)outs[i].act)
                                              : (Py_INCREF(empty_tuple), empty_tuple);
            PyObject *token = tuple ? PyContextVar_Set(var, tuple) : NULL;
            Py_XDECREF(tuple);
            if (token == NULL)
                return -1;
            Py_DECREF(token);
            continue;
        }
        int change = 0;
        PyObject *kept = PyList_New(0);
        if (kept == NULL) {
            Py_DECREF(acts);
            return -1;
        }
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(acts); k++) {
            PyObject *other = PyTuple_GET_ITEM(acts, k);
            int ours = 0;
            for (Py_ssize_t j = i; j < n && !ours; j++)
                ours = (PyObject *)outs[j].act == other;
            if (ours || !IS_ACT(other) || !((ActObject *)other)->open) {
                change = 1;
                continue;
            }
            if (PyList_Append(kept, other) < 0)
                goto fail;
        }
        for (Py_ssize_t j = i; j < n; j++) {
            PyObject *jslot = outs[j].act->slot;
            if (outs[j].entered && jslot != Py_None && slot_var(jslot) == var) {
                change = 1;
                if (PyList_Append(kept, (PyObject *)outs[j].act) < 0)
                    goto fail;
            }
        }
        Py_DECREF(acts);
        if (change) {
            PyObject *tuple = PyList_AsTuple(kept);
            PyObject *token = tuple ? PyContextVar_Set(var, tuple) : NULL;
            Py_XDECREF(tuple);
            if (token == NULL) {
                Py_DECREF(kept);
                return -1;
            }
            Py_DECREF(token);
        }
        Py_DECREF(kept);
        continue;
    fail:
        Py_DECREF(acts);
        Py_DECREF(kept);
        return -1;
    }
    return 0;
}

/* The stacklevel that points a warning at the user's code: frames of the
 * package's own Python modules are skipped (see _registry._caller_level). */
static int
caller_level(void)
{
    int level = 1;
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    while (frame != NULL) {
#if PY_VERSION_HEX >= 0x030B0000
        PyObject *globals = PyFrame_GetGlobals(frame);
#else
        PyObject *globals = frame->f_globals;
        Py_XINCREF(globals);
#endif
        PyObject *name = globals ? PyDict_GetItemWithError(globals, s_name) : NULL;
        int core = name != NULL && PySet_Contains(cfg.core_modules, name) == 1;
        Py_XDECREF(globals);
        if (PyErr_Occurred())
            PyErr_Clear();
        if (!core)
            break;
        level++;
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    return level;
}

static PyObject *
act_target(ActObject *act)
{
    return ((EntryObject *)act->entry)->target;
}

static PyObject *
act_name(ActObject *act)
{
    return ((RCoreObject *)act->redirect)->name;
}

static int
warn_conflict(ActObject *act, PyObject *conflict)
{
    PyObject *found = conflict == ABSENT ? PyUnicode_FromString("deleted")
                                         : PyUnicode_FromFormat("rebound to %R", conflict);
    PyObject *shown = found ? describe(act_target(act)) : NULL;
    PyObject *msg = shown ? PyUnicode_FromFormat(
                                "%U attribute %R was %U by someone else while redirected; "
                                "restoring the original anyway",
                                shown, act_name(act), found)
                          : NULL;
    Py_XDECREF(found);
    Py_XDECREF(shown);
    if (msg == NULL)
        return -1;
    const char *text = PyUnicode_AsUTF8(msg);
    int rc = text ? PyErr_WarnEx(cfg.conflict_warning, text, caller_level()) : -1;
    Py_DECREF(msg);
    return rc;
}

static PyObject *
restore_message(ActObject *act, PyObject *error)
{
    PyObject *shown = describe(act_target(act));
    PyObject *msg = shown ? PyUnicode_FromFormat("restoring attribute %R of %U failed: %S",
                                                 act_name(act), shown, error)
                          : NULL;
    Py_XDECREF(shown);
    return msg;
}

/* Keep the first exception of the work after the lock; clear the others. */
static void
keep_first(PyObject **pending)
{
    PyObject *exc = fetch_exc();
    if (*pending == NULL)
        *pending = exc;
    else
        Py_XDECREF(exc);
}

int
after_all(Outcomes *outcomes, int group)
{
    Outcome *outs = outcomes->items;
    Py_ssize_t n = outcomes->n;
    PyObject *pending = NULL; /* an exception from the work itself */
    PyObject *errors = NULL, *messages = NULL; /* made only when a restore failed */
    if (update_vars(outs, n) < 0)
        pending = fetch_exc();
    for (Py_ssize_t i = 0; i < n; i++) {
        ActObject *act = outs[i].act;
        if (outs[i].conflict != NULL && warn_conflict(act, outs[i].conflict) < 0)
            keep_first(&pending);
        if (outs[i].error != NULL) {
            if (errors == NULL) {
                errors = PyList_New(0);
                messages = PyList_New(0);
            }
            PyObject *msg = errors && messages ? restore_message(act, outs[i].error) : NULL;
            if (msg == NULL || PyList_Append(errors, outs[i].error) < 0 ||
                PyList_Append(messages, msg) < 0)
                keep_first(&pending);
            Py_XDECREF(msg);
        }
    }
    PyObject *cause = n == 1 ? outs[0].error : NULL;
    Py_XINCREF(cause);
    outcomes_free(outcomes);
    if (pending != NULL || errors == NULL) {
        Py_XDECREF(errors);
        Py_XDECREF(messages);
        Py_XDECREF(cause);
        if (pending != NULL) {
            raise_exc(pending);
            return -1;
        }
        return 0;
    }
    Py_ssize_t nerr = PyList_GET_SIZE(errors);
    PyObject *msg;
    if (!group && nerr == 1) {
        msg = PyList_GET_ITEM(messages, 0);
        Py_INCREF(msg);
    }
    else {
        PyObject *sep = PyUnicode_FromString("; ");
        PyObject *joined = sep ? PyUnicode_Join(sep, messages) : NULL;
        Py_XDECREF(sep);
        msg = joined ? PyUnicode_FromFormat("%zd restore(s) failed: %U", nerr, joined) : NULL;
        Py_XDECREF(joined);
    }
    PyObject *exc = msg ? PyObject_CallFunctionObjArgs(cfg.restore_error, msg, errors, NULL)
                        : NULL;
    Py_XDECREF(msg);
    Py_DECREF(errors);
    Py_DECREF(messages);
    if (exc == NULL) {
        Py_XDECREF(cause);
        return -1;
    }
    if (cause != NULL && !group) {
        Py_INCREF(cause);
        PyException_SetContext(exc, cause);
        PyException_SetCause(exc, cause);
    }
    Py_XDECREF(cause);
    raise_exc(exc);
    return -1;
}

/* After a failed entry was undone, outside the lock: the conflicts its
 * activations met as they were entered, in order (what they overwrote is
 * gone for good); then why the entry failed, or in its place the first
 * warning raised as an error. Twin of _registry.after_undo. Frees the
 * outcomes. */
void
after_undo(Outcomes *outcomes)
{
    PyObject *pending = fetch_exc();
    for (Py_ssize_t i = 0; i < outcomes->n; i++) {
        Outcome *out = &outcomes->items[i];
        if (out->conflict != NULL && warn_conflict(out->act, out->conflict) < 0) {
            Py_XSETREF(pending, fetch_exc());
            break;
        }
    }
    outcomes_free(outcomes);
    if (pending != NULL)
        raise_exc(pending);
}

/* ------------------------------------------------------------------------ */
/* the entry points */

PyObject *
handle_value(PyObject *handle)
{
    if (IS_ACT(handle)) {
        ActObject *act = (ActObject *)handle;
        PyObject *shown = ((RCoreObject *)act->redirect)->replacement;
        PyObject *value = shown == ABSENT ? act->value : shown;
        Py_INCREF(value);
        return value;
    }
    PyObject *value = ((GroupHandleObject *)handle)->value;
    Py_INCREF(value);
    return value;
}

PyObject *
py_enter(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    REQUIRE_CONFIGURED(NULL)
    if (nargs != 2 || !IS_ACT(args[0]) ||
        !PyObject_TypeCheck(((ActObject *)args[0])->redirect, &RCoreType)) {
        PyErr_SetString(PyExc_TypeError, "enter(act, target) takes an activation and its target");
        return NULL;
    }
    ActObject *act = (ActObject *)args[0];
    PyObject *conflict;
    if (lock_take(1) < 0)
        return NULL;
    int rc = enter_locked(act, args[1], &conflict);
    lock_give();
    if (rc < 0)
        return NULL;
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    if (outcome_add(&outs, act, 1, conflict, NULL) < 0 || after_all(&outs, 0) < 0) {
        undo_entered((PyObject *)act, NULL);
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *
act_stop(PyObject *self, PyObject *unused)
{
    REQUIRE_CONFIGURED(NULL)
    ActObject *act = (ActObject *)self;
    PyObject *conflict, *error;
    if (lock_take(0) < 0)
        return NULL;
    Py_INCREF(act);
    exit_locked(act, &conflict, &error);
    lock_give();
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    int rc = outcome_add(&outs, act, 0, conflict, error);
    Py_DECREF(act);
    if (rc < 0 || after_all(&outs, 0) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *
py_exit(PyObject *module, PyObject *act)
{
    if (!IS_ACT(act)) {
        PyErr_SetString(PyExc_TypeError, "exit(act) takes an activation");
        return NULL;
    }
    return act_stop(act, NULL);
}

int
stop_handle_locked(PyObject *handle, Outcomes *outs)
{
    if (IS_ACT(handle)) {
        PyObject *conflict, *error;
        exit_locked((ActObject *)handle, &conflict, &error);
        return outcome_add(outs, (ActObject *)handle, 0, conflict, error);
    }
    if (PyObject_TypeCheck(handle, &GroupHandleType)) {
        PyObject *parts = ((GroupHandleObject *)handle)->parts;
        Py_INCREF(parts);
        int rc = 0;
        for (Py_ssize_t i = PyList_GET_SIZE(parts) - 1; i >= 0 && rc == 0; i--) {
            if (i >= PyList_GET_SIZE(parts))
                continue;
            PyObject *part = PyList_GET_ITEM(parts, i);
            Py_INCREF(part);
            rc = stop_handle_locked(part, outs);
            Py_DECREF(part);
        }
        Py_DECREF(parts);
        return rc;
    }
    PyErr_SetString(PyExc_TypeError, "patchscope: not a handle");
    return -1;
}

PyObject *
group_stop(PyObject *self, PyObject *unused)
{
    REQUIRE_CONFIGURED(NULL)
    Outcomes outs;
    OUTCOMES_INIT(&outs);
    if (lock_take(0) < 0)
        return NULL;
    int rc = stop_handle_locked(self, &outs);
    lock_give();
    return after_stop(&outs, 1, rc);
}

PyObject *
after_stop(Outcomes *outs, int group, int rc)
{
    PyObject *pending = rc < 0 ? fetch_exc() : NULL; /* why stopping could not go on */
    rc = after_all(outs, group);
    if (pending != NULL) {
        if (rc < 0)
            PyErr_Clear();
        raise_exc(pending);
        return NULL;
    }
    if (rc < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyObject *
stop_any(PyObject *handle)
{
    if (IS_ACT(handle))
        return act_stop(handle, NULL);
    return group_stop(handle, NULL);
}
