"""The table of live activations, its lock, and the context-local slots.

One :class:`_Entry` exists per ``(target, name)`` while anything redirects it.
It records the original once, so exits may come in any order from any thread:
the visible value is always recomputed from the entry's stack of live
activations (the bug ``mock.patch`` and ``monkeypatch`` share is that each
patcher saves "the original" itself, so a non-LIFO exit reinstalls a
replacement forever).

Process activations write the attribute. Context activations install a
descriptor that answers per :class:`contextvars.Context`: a data descriptor on
a private subclass of the module's class (the original stays in the module's
``__dict__``), or a non-data descriptor in the class's ``__dict__``. The
descriptor is removed as soon as no context activation of that attribute is
live anywhere, so nothing is left behind.

All bookkeeping happens under one re-entrant lock (re-entrant because reading
an attribute can run a module ``__getattr__`` that imports code that patches),
re-created in a forked child. The process-scope ``with`` path is written for
speed: one lock section on entry and one on exit.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import os
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from ._cpython import inherits_object_new, preset_new, repair_new
from ._errors import (
    RedirectConflictWarning,
    RestoreError,
    TargetNotWritableError,
    UnsupportedTargetError,
)
from ._records import ActivationBase, ClassSlotBase, speedups
from ._records import Entry as _Entry
from ._records import ModuleSlot as _ModuleSlot
from ._resolve import (
    ABSENT,
    OBJECT_INIT,
    OBJECT_NEW,
    OWN,
    SETATTR,
    SHADOW,
    bind,
    capture,
    describe,
    is_data_descriptor,
    lookup_mro,
    private_module_classes,
    resolve,
)


def _new_lock() -> Any:
    """The registry lock: re-entrant, since reading an attribute can run code that patches."""
    return speedups.RLock() if speedups is not None else threading.RLock()


_lock = _new_lock()
_entries: dict[tuple[int, str], _Entry] = {}
# id(module) -> [original class, private subclass, number of live slots on it]
_module_swaps: dict[int, list[Any]] = {}
_get_ident = threading.get_ident
_getframe = sys._getframe
# ExitStack.enter_context calls __enter__ for its caller: report the caller.
_ENTER_CONTEXT = contextlib.ExitStack.enter_context.__code__

# The with-blocks that could not be paired cheaply: a linked list of
# (handles list, handle, next) for this context (see pair_enter).
_with_stack: contextvars.ContextVar[tuple[Any, ...] | None] = contextvars.ContextVar(
    "patchscope.with_stack", default=None
)


def _reinit_after_fork() -> None:
    # The parent may have forked while another thread held the lock; the
    # child has only this thread, so a fresh lock is correct.
    global _lock
    _lock = _new_lock()


os.register_at_fork(after_in_child=_reinit_after_fork)


class Activation(ActivationBase):
    """One live (or ended) activation of one ``(target, name)``.

    Returned by :meth:`Redirect.start` for a single redirect and by
    :func:`patchscope.active`, which returns the same object for as long as
    the activation is live. ``open`` is true until it ends. :meth:`stop` may
    be called from any thread, any number of times; attribute reads are safe
    at any time.
    """

    # The fields live in ActivationBase (C when the accelerator is built).
    __slots__ = ()

    @property
    def target(self) -> object:
        """The object whose attribute is redirected."""
        assert self._entry is not None
        return self._entry.target

    @property
    def name(self) -> str:
        """The redirected attribute's name (``"__new__"`` for constructions)."""
        assert self._entry is not None
        return self._entry.name

    @property
    def replacement(self) -> object:
        """What the redirect puts in place (for constructions: what is built)."""
        shown = self._redirect._replacement
        return self._value if shown is ABSENT else shown

    @property
    def scope(self) -> str:
        """``"process"`` or ``"context"``."""
        return self._redirect._scope  # type: ignore[no-any-return]

    @property
    def activations(self) -> tuple[Activation, ...]:
        """``(self,)``: the same shape as a combined activation's handle."""
        return (self,)

    @property
    def thread(self) -> threading.Thread | None:
        """The thread that entered this activation, or None if it has ended."""
        for thread in threading.enumerate():
            if thread.ident == self.thread_id:
                return thread
        return None

    @property
    def thread_name(self) -> str:
        """Name of the thread that entered this activation."""
        thread = self.thread
        return thread.name if thread is not None else f"<ended thread {self.thread_id}>"

    @property
    def site(self) -> str:
        """``"path/to/file.py:LINE"`` where the activation was entered."""
        code = self._code
        if code is None:
            return "<unknown>"
        line = code.co_firstlineno
        for start, end, lineno in code.co_lines():
            if start <= self._lasti < end and lineno is not None:
                line = lineno
                break
        return f"{code.co_filename}:{line}"

    def stop(self) -> None:
        """End this activation; harmless if it has ended already.

        Raises :class:`RestoreError` if putting the original back failed (the
        registry is consistent either way).
        """
        exit_activation(self)

    def __repr__(self) -> str:
        state = "live" if self.open else "ended"
        if self._entry is None:
            return f"<Activation {state}>"
        return (
            f"<Activation {state} {describe(self._entry.target)}.{self._entry.name} -> "
            f"{self.replacement!r} scope={self.scope!r} at {self.site}>"
        )


# ---------------------------------------------------------------------------
# context-local slots


class _ClassSlot(ClassSlotBase):
    """Non-data descriptor in a class's ``__dict__``; binds like the raw value would.

    Non-data, so an instance's own ``__dict__`` still wins as it did before.
    ``__get__`` and the fields are in ClassSlotBase (C when the accelerator
    is built): this context's replacement, else ``fallback`` (the process
    value), else what the class inherits.
    """

    __slots__ = ()

    def _chosen(self, instance: object, owner: type | None) -> Any:
        """The raw value this context sees: its own replacement, else the fallback.

        ABSENT when neither exists: the class then reads as it inherits.
        """
        acts = self.var.get()
        if acts:
            for act in reversed(acts):
                if act.open:
                    return act._value
        return self.fallback

    def _inherited(self, instance: object, owner: type | None) -> object:
        """The raw value from the classes after ours in the reader's MRO; ABSENT if none."""
        cls = self.cls_ref()
        mro = (owner if owner is not None else type(instance)).__mro__
        start = mro.index(cls) + 1 if cls in mro else 0
        for klass in mro[start:]:
            d = klass.__dict__
            if self.name in d:
                value = d[self.name]
                if value is OBJECT_NEW and self.name == "__new__":
                    # Looked up through the class, object.__new__ rejects the
                    # arguments it ignores when it is the class's own slot.
                    return OBJECT_NEW_STANDIN
                return value
        return ABSENT

    def _inherited_get(self, instance: object, owner: type | None) -> Any:
        """What reading gives with no value of ours: the inherited one, bound.

        Reads through the class also see the metaclass's attribute, as
        without the slot; reads through an instance do not.
        """
        value = self._inherited(instance, owner)
        if value is not ABSENT:
            return bind(value, instance, owner)
        if instance is None and owner is not None:
            meta = type(owner)
            value = lookup_mro(meta, self.name)
            if value is not ABSENT:
                return bind(value, owner, meta)
            raise AttributeError(
                f"type object {owner.__qualname__!r} has no attribute {self.name!r}"
            )
        raise AttributeError(
            f"{type(instance).__qualname__!r} object has no attribute {self.name!r}"
        )

    def _raw(self, instance: object) -> Any:
        """The raw value an instance's assignment or deletion goes through."""
        value = self._chosen(instance, type(instance))
        if value is ABSENT:
            value = self._inherited(instance, type(instance))
        if value is ABSENT:
            raise AttributeError(
                f"{type(instance).__qualname__!r} object has no attribute {self.name!r}"
            )
        return value


class _DataClassSlot(_ClassSlot):
    """The slot installed where the original is a data descriptor.

    A property with a setter or a ``__slots__`` member keeps working in every
    other context: assignment and deletion go to the value this context sees,
    and that value wins over the instance ``__dict__`` exactly when it is a
    data descriptor itself.
    """

    __slots__ = ()

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        value = self._chosen(instance, owner)
        if value is ABSENT:
            value = self._inherited(instance, owner)
            if value is ABSENT:
                return self._inherited_get(instance, owner)
        if instance is not None and not is_data_descriptor(value):
            own = getattr(instance, "__dict__", None)
            if own is not None and self.name in own:
                return own[self.name]
        return bind(value, instance, owner)

    def __set__(self, instance: object, new: object) -> None:
        value = self._raw(instance)
        setter: Any = lookup_mro(type(value), "__set__")
        if setter is not ABSENT:
            setter(value, instance, new)
        else:
            _instance_dict(instance, self.name)[self.name] = new

    def __delete__(self, instance: object) -> None:
        value = self._raw(instance)
        deleter: Any = lookup_mro(type(value), "__delete__")
        if deleter is not ABSENT:
            deleter(value, instance)
            return
        own = _instance_dict(instance, self.name)
        if self.name not in own:
            raise AttributeError(self.name)
        del own[self.name]


def _instance_dict(instance: object, name: str) -> dict[str, Any]:
    own = getattr(instance, "__dict__", None)
    if own is None:
        raise AttributeError(
            f"{type(instance).__name__!r} object attribute {name!r} is read-only"
        )
    return own  # type: ignore[no-any-return]


class _WeakIdCache:
    """``obj -> value`` for as long as *obj* lives; lookups by identity.

    Slots (and their ContextVars) are cached per target so that repeated
    context activations reuse one ContextVar: every ContextVar ever set in a
    thread's context stays in that context, so a fresh one per activation
    would grow it without bound. Values must not refer to their key.
    """

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, obj: object) -> Any:
        item = self._items.get(id(obj))
        return item[1] if item is not None and item[0]() is obj else None

    def set(self, obj: object, value: Any) -> None:
        key, items = id(obj), self._items

        def forget(_: weakref.ref[Any]) -> None:
            items.pop(key, None)

        items[key] = (weakref.ref(obj, forget), value)


_module_subclasses = _WeakIdCache()  # module -> its private subclass
_class_slots = _WeakIdCache()  # class -> {name: _ClassSlot}


def _module_miss(module: types.ModuleType, name: str) -> Any:
    """What ``module.<name>`` gives when ordinary lookup found nothing.

    PEP 562: the module's own ``__getattr__``, called once; else the
    module type's own lookup, for its exact error message.
    """
    hook = vars(module).get("__getattr__")
    if hook is not None:
        return hook(name)
    return types.ModuleType.__getattribute__(module, name)


def _private_module_class(base: type) -> type:
    """The private subclass a module's class is swapped for while it has context slots.

    Since 3.14 the specializing interpreter turns a warm read of an attribute
    of any object whose type has the module ``tp_getattro`` into a direct read
    of the module's ``__dict__``, past the slot (CPython gh-156399). Giving the
    subclass the generic ``__getattribute__`` plus a ``__getattr__`` makes its
    ``tp_getattro`` something the specializer does not treat as a module;
    :func:`_module_miss` then does what the module type does for names
    ordinary lookup does not find, so other names read at the generic speed
    and a module ``__getattr__`` is called exactly once, as before.
    """
    namespace: dict[str, Any] = {"__slots__": (), "__module__": base.__module__}
    if (
        _MODULE_READS_SPECIALIZED
        and lookup_mro(base, "__getattribute__") is _MODULE_GETATTRIBUTE
        and lookup_mro(base, "__getattr__") is ABSENT
    ):
        # A base with hooks of its own is not read as a module: leave it be.
        namespace["__getattribute__"] = object.__getattribute__
        namespace["__getattr__"] = _module_miss
    return type(base.__name__, (base,), namespace)


_MODULE_READS_SPECIALIZED = sys.version_info >= (3, 14)
_MODULE_GETATTRIBUTE = vars(types.ModuleType)["__getattribute__"]


def _install_slot(entry: _Entry) -> None:
    target, name = entry.target, entry.name
    if isinstance(target, types.ModuleType):
        swap = _module_swaps.get(id(target))
        if swap is not None:
            sub = swap[1]
        else:
            sub = _module_subclasses.get(target)
            if sub is None or sub.__base__ is not type(target):
                sub = _private_module_class(type(target))
                _module_subclasses.set(target, sub)
                private_module_classes.add(sub)
        slot = sub.__dict__.get(name)
        if not isinstance(slot, _ModuleSlot):
            slot = _ModuleSlot(target, name)
            setattr(sub, name, slot)
        if swap is None:
            base = type(target)
            try:
                target.__class__ = sub
            except TypeError as exc:
                raise _not_writable(target, name, exc) from exc
            _module_swaps[id(target)] = [base, sub, 1]
        else:
            swap[2] += 1
        entry.slot = slot
        return
    assert isinstance(target, type)
    slots = _class_slots.get(target)
    if slots is None:
        slots = {}
        _class_slots.set(target, slots)
    fallback = _process_value(entry)
    original = fallback if fallback is not ABSENT else lookup_mro(target, name)
    # Data descriptors (properties with setters, __slots__ members) keep
    # their precedence and their setter in every other context.
    kind = _DataClassSlot if is_data_descriptor(original) else _ClassSlot
    cslot = slots.get((name, kind))
    if cslot is None:
        cslot = slots[(name, kind)] = kind(target, name)
    cslot.fallback = fallback
    try:
        setattr(target, name, cslot)
    except (TypeError, AttributeError) as exc:
        raise _not_writable(target, name, exc) from exc
    entry.slot = cslot


def _uninstall_slot(entry: _Entry) -> None:
    """Forget the slot; a module gets its own class back with its last slot.

    A class's slot stays in its dict until the caller writes the process
    value (or the original) back over it.
    """
    target = entry.target
    entry.slot = None
    if isinstance(target, types.ModuleType):
        swap = _module_swaps[id(target)]
        swap[2] -= 1
        if swap[2] == 0:
            del _module_swaps[id(target)]
            if type(target) is swap[1]:
                target.__class__ = swap[0]


def object_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``object.__new__`` as ``type.__call__`` uses it, for classes given a ``__new__``."""
    if (args or kwargs) and lookup_mro(cls, "__init__") is OBJECT_INIT:
        raise TypeError(f"{cls.__qualname__}() takes no arguments")
    return object.__new__(cls)


#: Left in a class whose inherited ``object.__new__`` was redirected (see below).
OBJECT_NEW_STANDIN = staticmethod(object_new)


# ---------------------------------------------------------------------------
# reading and writing the visible value


def _process_top(entry: _Entry) -> Activation | None:
    act: Activation
    for act in reversed(entry.stack):
        if not act._ctx:
            return act
    return None


def _process_value(entry: _Entry) -> object:
    top = _process_top(entry)
    if top is not None:
        return top._value
    return entry.original if entry.kind == OWN else ABSENT


def _read(entry: _Entry) -> object:
    if entry.kind == SETATTR:
        return getattr(entry.target, entry.name, ABSENT)
    return entry.target.__dict__.get(entry.name, ABSENT)


def _not_writable(target: object, name: str, exc: BaseException) -> TargetNotWritableError:
    return TargetNotWritableError(
        f"cannot redirect attribute {name!r} of {describe(target)}: the target refuses the write "
        f"({type(exc).__name__}: {exc}); redirect the attribute where it is defined "
        "or on an object that accepts writes"
    )


def _write_process_state(entry: _Entry) -> None:
    """Make the target show the current process value (top replacement or original).

    Class targets with a live context slot keep the slot in their dict and
    only update its fallback.
    """
    target, name = entry.target, entry.name
    top = _process_top(entry)
    slot = entry.slot
    if isinstance(slot, _ClassSlot):
        slot.fallback = _process_value(entry)
        return
    if top is not None:
        setattr(target, name, top._value)
        entry.installed = top._value
        entry.written = True
        return
    if entry.written:
        _restore_original(entry)


def _restore_original(entry: _Entry) -> None:
    """Put the original back by identity, or delete what shadowed it."""
    target, name = entry.target, entry.name
    entry.written = False
    entry.installed = ABSENT
    if entry.kind == OWN or (entry.kind == SETATTR and entry.original is not ABSENT):
        setattr(target, name, entry.original)
    elif entry.kind == SETATTR or name in target.__dict__:
        if name == "__new__" and isinstance(target, type):
            _delete_new(target)
        else:
            delattr(target, name)


def _delete_new(cls: type) -> None:
    """Delete a class's ``__new__`` so that it constructs exactly as before it had one.

    CPython cannot take a ``__new__`` away again by itself (see _cpython):
    where the class then inherits a builtin's ``__new__`` (``object``'s,
    ``dict``'s, ...), its tp_new slot is set first, so no construction in
    another thread meets the generic slot in between; where that is not
    possible, a repair follows, or else a stand-in that behaves exactly like
    ``object.__new__`` keeps the class working.
    """
    preset = preset_new(cls)
    delattr(cls, "__new__")
    if not preset and inherits_object_new(cls) and not repair_new(cls):
        setattr(cls, "__new__", OBJECT_NEW_STANDIN)  # noqa: B010 (mypy: no assigning methods)


# ---------------------------------------------------------------------------
# entering and exiting


def _fresh_entry(redirect: Any, target: object, name: str) -> _Entry:
    """The entry for the first activation of ``(target, name)``: recycled or captured."""
    entry = redirect._spare
    if entry is not None:
        # Same target, plain module/class attribute: re-read the original.
        redirect._spare = None
        raw = target.__dict__.get(name, ABSENT)
        if raw is not ABSENT:
            entry.kind = OWN
            entry.original = raw
            return entry  # type: ignore[no-any-return]
        if redirect._name == "__new__":
            # A class's __new__ always resolves: an absent one is inherited.
            entry.kind = SHADOW
            entry.original = ABSENT
            return entry  # type: ignore[no-any-return]
    kind, original = capture(target, name, redirect._create)
    return _Entry(target, name, kind, original)


def _enter_locked(redirect: Any, target: object, key: tuple[int, str], act: Activation) -> None:
    """Register *act* and make it visible; call under the lock. All-or-nothing."""
    entry = _entries.get(key)
    if entry is None:
        # The first activation of (target, name): nothing else to consider.
        name = key[1]
        entry = _fresh_entry(redirect, target, name)
        if act._ctx:
            parked = entry.parked
            if (
                parked is not None
                and type(target) is parked[0]
                and entry.kind == OWN
                and id(target) not in _module_swaps
            ):
                # The module's class and slot from last time still fit.
                target.__class__ = parked[1]
                _module_swaps[id(target)] = [parked[0], parked[1], 1]
                entry.slot = act._slot = parked[2]
                entry.stack.append(act)
                entry.n_context = 1
            else:
                _enter_context(entry, act)
        else:
            value = act._value
            try:
                setattr(target, name, value)
            except Exception as exc:
                raise _not_writable(target, name, exc) from exc
            entry.stack.append(act)
            entry.installed = value
            entry.written = True
        act._entry = entry
        _entries[key] = entry
        return
    if act._ctx:
        _enter_context(entry, act)
    else:
        entry.stack.append(act)
        try:
            if entry.slot is None:
                value = act._value
                setattr(target, key[1], value)
                entry.installed = value
                entry.written = True
            else:
                _write_process_state(entry)
        except Exception as exc:
            entry.stack.pop()
            raise _not_writable(target, key[1], exc) from exc
    act._entry = entry


def _push_context(act: Activation) -> None:
    """Make a context activation visible in the current context (after the lock)."""
    var = act._slot.var
    acts = var.get()
    var.set((*[a for a in acts if a.open], act) if acts else (act,))


def _activate(redirect: Any, code: Any, lasti: int) -> Activation:
    """Activate a single-attribute redirect: ``_activate`` of attribute and construction ones."""
    target = redirect._target
    if redirect._key is None:
        target = resolve(target)
    act = Activation(redirect, redirect._value, code, lasti)
    if redirect._ctx:
        act._ctx = True
    if redirect._spec is not None:
        redirect._prepare(act)
    enter_activation(redirect, target, act)
    return act


def _enter_activation(redirect: Any, target: object, act: Activation) -> None:
    """Register *act* on ``target.<redirect's name>`` and make it visible; all-or-nothing."""
    lock = _lock
    lock.acquire()
    try:
        _enter_locked(redirect, target, (id(target), redirect._name), act)
    finally:
        lock.release()
    if act._slot is not None:
        _push_context(act)


def _enter_context(entry: _Entry, act: Activation) -> None:
    target = entry.target
    if not isinstance(target, (types.ModuleType, type)) or entry.kind == SETATTR:
        raise UnsupportedTargetError(
            f"cannot redirect attribute {entry.name!r} of {describe(target)} with "
            "scope='context': context-local redirects work on module and class "
            "attributes stored in __dict__; redirect the class attribute instead, "
            "or use scope='process'"
        )
    entry.stack.append(act)
    entry.n_context += 1
    if entry.slot is None:
        try:
            _install_slot(entry)
        except BaseException:
            entry.stack.pop()
            entry.n_context -= 1
            raise
    act._slot = entry.slot


#: "nobody else rebound the name" (ABSENT is a possible conflicting value: a deletion)
_NO_CONFLICT: Any = object()


def _exit_locked(act: Activation) -> tuple[object, BaseException | None]:
    """Remove *act* under the lock; return (conflicting value or _NO_CONFLICT, restore error)."""
    act.open = False
    entry = act._entry
    if entry is None:
        return _NO_CONFLICT, None
    stack = entry.stack
    target, name = entry.target, entry.name
    conflict: object = _NO_CONFLICT
    error: BaseException | None = None
    if len(stack) == 1 and entry.kind != SETATTR and not (entry.written and act._ctx):
        # The common case: the only activation ends; put the original back.
        slot = entry.slot
        expected: object
        if slot is None:
            expected = entry.installed
        elif act._ctx and slot.__class__ is _ModuleSlot:
            entry.n_context = 0
            entry.slot = None
            swap = _module_swaps[id(target)]
            if swap[2] == 1:
                del _module_swaps[id(target)]
                if type(target) is swap[1]:
                    target.__class__ = swap[0]
            else:
                swap[2] -= 1
            entry.parked = (swap[0], swap[1], slot)
            expected = entry.original if entry.kind == OWN else ABSENT
        else:
            expected = _NO_CONFLICT  # a class slot: the general path below
        if expected is not _NO_CONFLICT:
            stack.pop()
            del _entries[entry.key]
            current = target.__dict__.get(name, ABSENT)
            if current is not expected:
                # Someone else rebound the name while we held it.
                conflict = current
                entry.written = True
            try:
                if entry.written:
                    _restore_original(entry)
            except Exception as exc:
                error = exc
            redirect = act._redirect
            if redirect._plain and error is None:
                redirect._spare = entry
            return conflict, error
    was_top = stack[-1] is act
    if was_top:
        stack.pop()
    else:
        stack.remove(act)
    try:
        slot = entry.slot
        if slot is None:
            if was_top:
                current = _read(entry)
                if current is not entry.installed and entry.written:
                    conflict = current
                _write_process_state(entry)
        else:
            if act._ctx:
                entry.n_context -= 1
            if entry.n_context == 0:
                # What the target's dict should hold now, if nobody else wrote.
                current = target.__dict__.get(name, ABSENT)
                if isinstance(slot, _ClassSlot):
                    expected = slot
                elif entry.written:
                    expected = entry.installed
                else:
                    expected = entry.original if entry.kind == OWN else ABSENT
                if current is not expected:
                    conflict = current
                _uninstall_slot(entry)
                if conflict is not _NO_CONFLICT or isinstance(slot, _ClassSlot):
                    # The dict holds our slot or someone else's value: rewrite it.
                    entry.written = True
            _write_process_state(entry)
    except Exception as exc:
        error = exc
    if not stack:
        del _entries[entry.key]
        redirect = act._redirect
        if redirect._plain and error is None:
            redirect._spare = entry
    return conflict, error


#: The modules whose frames lie between a user's ``with`` or ``stop()`` and a warning.
_CORE_MODULES = frozenset(
    f"patchscope.{name}" for name in ("_registry", "_redirect", "_construct", "_decorate")
)


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning from the caller at the user's code.

    The first frame outside the core: the ``with`` statement or ``stop()``
    call that ended the activation, however many core frames (none, where
    the C accelerator ran) lie between. The test fixture's teardown counts
    as the user.
    """
    level = 2
    frame: types.FrameType | None = _getframe(2)
    while frame is not None and frame.f_globals.get("__name__") in _CORE_MODULES:
        level += 1
        frame = frame.f_back
    return level


def _after_exit(act: Activation, conflict: object, error: BaseException | None) -> None:
    slot = act._slot
    if slot is not None:
        var = slot.var
        acts = var.get()
        if len(acts) == 1 and acts[0] is act:
            var.set(())
        elif act in acts:
            var.set(tuple(a for a in acts if a.open))
    if conflict is not _NO_CONFLICT:
        found = "deleted" if conflict is ABSENT else f"rebound to {conflict!r}"
        warnings.warn(
            RedirectConflictWarning(
                f"{describe(act.target)} attribute {act.name!r} was {found} "
                "by someone else while redirected; restoring the original anyway"
            ),
            stacklevel=_caller_level(),
        )
    if error is not None:
        raise RestoreError(
            f"restoring attribute {act.name!r} of {describe(act.target)} failed: {error}",
            [error],
        ) from error


def _acquire_to_end(lock: Any) -> BaseException | None:
    """Take *lock* to end an activation, whatever a signal handler raises meanwhile.

    An exception raised while waiting (Ctrl-C) must not stop the exit half
    way, leaving the redirect installed: it is returned, to raise once the
    activation has ended.
    """
    pending: BaseException | None = None
    while True:
        try:
            lock.acquire()
        except BaseException as exc:
            pending = exc
        else:
            return pending


def _exit_activation(act: Activation) -> None:
    """End *act*; idempotent. Warns on conflicts, raises RestoreError after cleanup."""
    lock = _lock
    pending = _acquire_to_end(lock)
    try:
        try:
            if not act.open:
                return
            conflict, error = _exit_locked(act)
        finally:
            lock.release()
        _after_exit(act, conflict, error)
    finally:
        if pending is not None:
            raise pending


# ---------------------------------------------------------------------------
# pairing with-blocks with their handles
#
# A Redirect holds no per-activation state, so ``__exit__`` must find the
# handle its ``__enter__`` made. Each Redirect keeps the list of its live
# with-handles, each remembering the frame of its with-statement: a with
# statement calls __enter__ and __exit__ from the same frame object, also in
# a generator that is suspended inside the block and resumed later, in any
# thread. Within one frame, blocks nest, so the newest handle of that frame is
# the one. Only callers that enter and exit from different frames
# (contextlib.ExitStack) fall back to the context's with-stack: a handle is
# pushed there when its thread already had a live with-handle of the same
# Redirect, so nested exits pair exactly; every other handle is the only one
# of its thread.


def _pair_enter(handles: list[Any], handle: Any, frame: Any) -> None:
    """Record *handle* as a live with-handle entered from *frame*; under the lock."""
    handle._frame = frame
    if handles:
        me = handle.thread_id
        for other in handles:
            if other.thread_id == me:
                handle._pushed = True
                break
    handles.append(handle)


def _pair_exit(handles: list[Any], frame: Any) -> Any:
    """Find and forget the handle the ``__exit__`` called from *frame* belongs to."""
    if len(handles) == 1 and handles[0]._frame is frame and not handles[0]._pushed:
        handle = handles.pop()
        handle._frame = None
        return handle
    for i in range(len(handles) - 1, -1, -1):
        handle = handles[i]
        if handle._frame is frame:
            del handles[i]
            handle._frame = None
            if handle._pushed:
                _forget_node(handles, handle)
            return handle
    handle = None
    me = _get_ident()
    node = _with_stack.get()
    if node is not None:
        # A node counts if it is this redirect's, live, and this thread's (a
        # context copied into another thread carries the parent's nodes).
        while node is not None and not (
            node[0] is handles and node[1].thread_id == me and node[1] in handles
        ):
            node = node[2]
        if node is not None:
            handle = node[1]
            _forget_node(handles, handle)
    if handle is None and len(handles) == 1:
        handle = handles[0]
    if handle is None:
        handle = _entered_by_helper(handles, me)
    if handle is None:
        for other in reversed(handles):
            if other.thread_id == me and not other._pushed:
                handle = other
                break
    if handle is None:
        raise RuntimeError("__exit__ without a matching __enter__ in this thread")
    handles.remove(handle)
    handle._frame = None
    return handle


_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _entered_by_helper(handles: list[Any], me: int) -> Any:
    """The newest handle entered from a frame that has returned (ExitStack and the like).

    A with-block still running, or suspended in a generator, exits from its own
    frame, so it is never the one an exit from a foreign frame belongs to.
    """
    running: set[int] = set()
    for top in sys._current_frames().values():
        frame: Any = top
        while frame is not None:
            running.add(id(frame))
            frame = frame.f_back
    candidates = [
        h
        for h in handles
        if h._frame is not None
        and id(h._frame) not in running
        and not h._frame.f_code.co_flags & _SUSPENDABLE
    ]
    for handle in reversed(candidates):
        if handle.thread_id == me:
            return handle
    return candidates[-1] if candidates else None


def _forget_node(handles: list[Any], handle: Any) -> None:
    """Drop *handle*'s node from this context's with-stack, if it is there."""
    node = _with_stack.get()
    skipped = []
    while node is not None and not (node[0] is handles and node[1] is handle):
        skipped.append(node)
        node = node[2]
    if node is None:
        return
    rest = node[2]
    for other in reversed(skipped):
        rest = (other[0], other[1], rest)
    _with_stack.set(rest)


def _enter_with(redirect: Any) -> Any:
    """``__enter__`` of a single-attribute redirect: registry and pairing in one lock."""
    frame = _getframe(1)
    site: Any = frame.f_back if frame.f_code is _ENTER_CONTEXT else frame
    act = Activation(redirect, redirect._value, site.f_code, site.f_lasti)
    if redirect._ctx:
        act._ctx = True
    if redirect._spec is not None:
        redirect._prepare(act)
    key = redirect._key
    if key is None:
        target = resolve(redirect._target)
        key = (id(target), redirect._name)
    else:
        target = redirect._target
    handles = redirect._handles
    lock = _lock
    lock.acquire()
    try:
        _enter_locked(redirect, target, key, act)
        if handles:
            _pair_enter(handles, act, frame)
        else:
            act._frame = frame
            handles.append(act)
    finally:
        lock.release()
    if act._slot is not None:
        _push_context(act)
    if act._pushed:
        _push_with(handles, act)
    return redirect._replacement


def _push_with(handles: list[Any], act: Any) -> None:
    """Record a with-handle on this context's with-stack (see the pairing rules above)."""
    _with_stack.set((handles, act, _with_stack.get()))


def _exit_with(redirect: Any, *exc_info: object) -> None:
    """``__exit__`` of a single-attribute redirect: pairing and registry in one lock."""
    handles = redirect._handles
    frame = _getframe(1)
    lock = _lock
    pending = _acquire_to_end(lock)
    try:
        try:
            if len(handles) == 1 and handles[0]._frame is frame and not handles[0]._pushed:
                act = handles.pop()
                act._frame = None
            else:
                act = _pair_exit(handles, frame)
            if not act.open:
                return
            conflict, error = _exit_locked(act)
        finally:
            lock.release()
        if conflict is not _NO_CONFLICT or error is not None or act._slot is not None:
            _after_exit(act, conflict, error)
    finally:
        if pending is not None:
            raise pending


def generic_enter(redirect: Any, frame: Any) -> Any:
    """``__enter__`` for any Redirect: activate, then pair the handle."""
    site: Any = frame.f_back if frame.f_code is _ENTER_CONTEXT else frame
    handle = redirect._activate(site.f_code, site.f_lasti)
    handles = redirect._handles
    lock = _lock
    lock.acquire()
    try:
        _pair_enter(handles, handle, frame)
    finally:
        lock.release()
    if handle._pushed:
        _with_stack.set((handles, handle, _with_stack.get()))
    return handle.replacement if isinstance(handle, Activation) else handle.value


def generic_exit(redirect: Any, frame: Any) -> None:
    """``__exit__`` for any Redirect: find this with-block's handle and stop it."""
    lock = _lock
    pending = _acquire_to_end(lock)
    try:
        try:
            handle = _pair_exit(redirect._handles, frame)
        finally:
            lock.release()
        handle.stop()
    finally:
        if pending is not None:
            raise pending


def active() -> tuple[Activation, ...]:
    """Snapshot of every live activation, oldest first within each attribute.

    Thread-safe: taken under the registry lock; the activations may end right
    after it returns.
    """
    with _lock:
        return tuple(act for entry in _entries.values() for act in entry.stack)


# The entry points of the registry: the C fast path where the accelerator is
# built (it calls the Python functions above for every case it does not take
# itself), else those Python functions. ``enter_with``/``exit_with`` are the
# ``__enter__``/``__exit__`` of single-attribute redirects.
# ``activate`` is the ``_activate`` method of those redirects.
enter_activation: Callable[[Any, object, Activation], None]
exit_activation: Callable[[Activation], None]
activate: Any
enter_with: Any
exit_with: Any
if speedups is not None:
    speedups.bind(globals())
    enter_activation = speedups.enter_activation
    exit_activation = speedups.exit_activation
    activate = speedups.RedirectBase._c_activate
    enter_with = speedups.RedirectBase._c_enter
    exit_with = speedups.RedirectBase._c_exit
else:
    enter_activation = _enter_activation
    exit_activation = _exit_activation
    activate = _activate
    enter_with = _enter_with
    exit_with = _exit_with
