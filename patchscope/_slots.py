"""What a context-scope redirect installs on its target: objects that answer per context.

A context activation must be visible only in the context (thread, asyncio
task) that entered it, while every other context sees the original by
identity. Each kind of target gets an object that reads a
:class:`contextvars.ContextVar` holding this context's activations:

* a module: a data descriptor (:class:`ModuleSlot`) on a private subclass of
  the module's class, which the module is switched to while any context
  activation of it is live; the module's ``__dict__`` keeps the process value
  (the original when there is no process activation), so ``vars(module)``
  and other contexts see it unchanged;
* a class: a descriptor in the class's ``__dict__`` (:class:`ClassSlot`, or
  :class:`DataClassSlot` where the original is a data descriptor) that binds
  exactly as the value it stands for would;
* a class's construction: the :class:`Dispatcher` a construction redirect
  installs as ``__new__``, in both scopes.

Every slot reads one ContextVar, :data:`ACTIVATIONS`: the tuple of this
context's context-scope activations, of every target. Entering or ending
any number of them at once (a group) sets it once, and a context holds one
variable however many targets it redirected (every ContextVar ever set in a
context stays in it). The slots are cached per target and name, so repeated
activations reuse them.
:func:`install` and :func:`uninstall` put them in place and take them away
for the registry, under its lock.

Twins: ``ModuleSlot``, ``ClassSlot``, ``DataClassSlot``, ``Dispatcher``,
``module_class``, ``is_private_module_class`` and ``prepare`` (with the caches
behind it), ``install`` and ``uninstall`` have C twins in ``_c/slots.c``; keep
them in sync. This module is the reference.
"""

from __future__ import annotations

import contextvars
import copyreg
import inspect
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

from ._accel import twin
from ._cpython import OBJECT_NEW_STANDIN, object_new
from ._resolve import ABSENT, OBJECT_NEW, OWN, bind, is_data_descriptor, lookup_mro

# ---------------------------------------------------------------------------
# modules


class _PyModuleSlot:
    """Data descriptor on a module's private subclass; the value stays in the module's dict.

    ``__get__`` gives this context's innermost open activation's value, else
    what the module's ``__dict__`` holds (the process value). ``owner`` is
    the private subclass it is set on.
    """

    __slots__ = ("dict", "name", "owner", "var")

    def __init__(
        self,
        module: types.ModuleType,
        name: str,
        owner: type,
        var: contextvars.ContextVar[tuple[Any, ...]],
    ) -> None:
        self.dict = module.__dict__
        self.name = name
        self.owner = owner
        self.var = var  # ACTIVATIONS, shared by all slots; each finds its own activations

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        for act in reversed(self.var.get()):
            if act._slot is self and act.open:
                if act._value is ABSENT:  # patchscope.DELETE: this context sees no attribute
                    raise AttributeError(self.name)
                return act._value
        try:
            return self.dict[self.name]
        except KeyError:
            # module_getattro turns this into the usual message, or calls the
            # module's __getattr__ exactly as without the slot.
            raise AttributeError(self.name) from None

    def __set__(self, instance: object, value: object) -> None:
        self.dict[self.name] = value

    def __delete__(self, instance: object) -> None:
        try:
            del self.dict[self.name]
        except KeyError:
            raise AttributeError(self.name) from None


_private_module_classes: weakref.WeakSet[type] = weakref.WeakSet()


def _module_miss(module: types.ModuleType, name: str) -> Any:
    """What ``module.<name>`` gives when ordinary lookup found nothing.

    The module type's own lookup, once more: it finds nothing either, then
    calls the module's ``__getattr__`` (PEP 562) once, or raises the module
    type's exact error message.
    """
    return types.ModuleType.__getattribute__(module, name)


_MODULE_READS_SPECIALIZED = sys.version_info >= (3, 14)
_MODULE_GETATTRIBUTE = vars(types.ModuleType)["__getattribute__"]


def _py_module_class(base: type) -> type:
    """The private subclass of *base* that a module is switched to while it has slots.

    Since 3.14 the specializing interpreter turns a warm read of an attribute
    of any object whose type has the module ``tp_getattro`` into a direct read
    of the module's ``__dict__``, past the slot (CPython gh-156399). Giving the
    subclass the generic ``__getattribute__`` plus a ``__getattr__`` makes its
    ``tp_getattro`` something the specializer does not treat as a module;
    :func:`_module_miss` then does what the module type does for names
    ordinary lookup does not find, so other names read at the generic speed
    and a module ``__getattr__`` is called exactly once, as before. (The C
    twin gives the subclass a ``tp_getattro`` that calls the module one
    instead, which changes nothing visible.)
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
    sub = type(base.__name__, (base,), namespace)
    _private_module_classes.add(sub)
    return sub


def _py_is_private_module_class(tp: type) -> bool:
    """True if *tp* was made by :func:`module_class`."""
    return tp in _private_module_classes


def own_class(module: types.ModuleType) -> type:
    """The module's own class, looking through a private subclass of ours."""
    tp = type(module)
    return tp.__base__ if is_private_module_class(tp) else tp  # type: ignore[return-value]


class _WeakIdCache:
    """``obj -> value`` for as long as *obj* lives; lookups by identity.

    Values must not refer to their key.
    """

    __slots__ = ("_forgotten", "_items")

    def __init__(self, forgotten: Callable[[int], object] | None = None) -> None:
        self._items: dict[int, tuple[weakref.ref[Any], Any]] = {}
        self._forgotten = forgotten  # called with the id of an object that died

    def get(self, obj: object) -> Any:
        item = self._items.get(id(obj))
        return item[1] if item is not None and item[0]() is obj else None

    def set(self, obj: object, value: Any) -> None:
        key, items = id(obj), self._items

        forgotten = self._forgotten

        def forget(_: weakref.ref[Any]) -> None:
            items.pop(key, None)
            if forgotten is not None:
                forgotten(key)

        items[key] = (weakref.ref(obj, forget), value)


#: id(module) -> [own class, private subclass, names of the entries with a slot on it].
#: The module is switched to the subclass while the names are not empty; the
#: record goes when the module dies (with its _module_classes entry).
module_swaps: dict[int, list[Any]] = {}


def _forget_swap(key: int, pop: Callable[[int, None], object] = module_swaps.pop) -> None:
    """Drop a dead module's record; ``pop`` is bound at definition.

    Modules also die at interpreter exit, after this module's globals are cleared.
    """
    pop(key, None)


#: module -> (its private subclass, the ContextVar its slots read)
_module_classes = _WeakIdCache(_forget_swap)


#: This context's open context-scope activations, oldest first, of every
#: target: what every slot reads, finding its own by ``act._slot``.
ACTIVATIONS: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar(
    "patchscope:activations", default=()
)


def _module_slot(module: types.ModuleType, name: str) -> Any:
    """The cached slot for ``module.<name>`` (created, and set on the private subclass).

    Changes nothing the module shows: the subclass is not the module's class
    until :func:`install` switches it.
    """
    base = own_class(module)
    cached = _module_classes.get(module)
    if cached is None or cached[0].__base__ is not base:
        var = ACTIVATIONS
        cached = (module_class(base), var)
        _module_classes.set(module, cached)
    sub, var = cached
    slot = sub.__dict__.get(name)
    if type(slot) is not ModuleSlot:
        slot = ModuleSlot(module, name, sub, var)
        setattr(sub, name, slot)
    return slot


# ---------------------------------------------------------------------------
# classes


class _PyClassSlot:
    """Non-data descriptor in a class's ``__dict__``; binds like the raw value would.

    Non-data, so an instance's own ``__dict__`` still wins as it did before.
    Reads give this context's replacement, else ``fallback`` (the process
    value), else what the class inherits. ``displaced`` is the raw value the
    slot stands in place of (ABSENT if none).
    """

    __slots__ = ("cls_ref", "displaced", "fallback", "name", "var")

    def __init__(self, cls: type, name: str, var: contextvars.ContextVar[tuple[Any, ...]]) -> None:
        self.cls_ref = weakref.ref(cls)  # the class may die; its slots die with it
        self.name = name
        self.fallback: object = ABSENT
        self.displaced: object = ABSENT
        self.var = var  # ACTIVATIONS, shared by all slots; each finds its own activations

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        value = self._chosen()
        if value is ABSENT:
            return self._inherited_get(instance, owner)
        return bind(value, instance, owner)

    def _chosen(self) -> Any:
        """The raw value this context sees: its own replacement, else the fallback.

        ABSENT when neither exists: the class then reads as it inherits.
        """
        for act in reversed(self.var.get()):
            if act._slot is self and act.open:
                return act._value
        return self.fallback

    def _inherited(self, instance: object, owner: type | None) -> object:
        """The raw value from the classes after ours in the reader's MRO; ABSENT if none."""
        cls = self.cls_ref()
        through = owner if owner is not None else type(instance)
        if not isinstance(through, type):
            raise TypeError(
                f"__get__(): the owner must be a class, not {type(through).__name__}"
            )
        mro = through.__mro__
        if cls not in mro:
            return ABSENT  # read through a class ours is not a base of
        for klass in mro[mro.index(cls) + 1 :]:
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
        value = self._chosen()
        if value is ABSENT:
            value = self._inherited(instance, type(instance))
        if value is ABSENT:
            raise AttributeError(
                f"{type(instance).__qualname__!r} object has no attribute {self.name!r}"
            )
        return value


class _PyDataClassSlot(_PyClassSlot):
    """The slot installed where the original is a data descriptor.

    A property with a setter or a ``__slots__`` member keeps working in every
    other context: assignment and deletion go to the value this context sees,
    and that value wins over the instance ``__dict__`` exactly when it is a
    data descriptor itself.
    """

    __slots__ = ()

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        value = self._chosen()
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


#: class -> ({name: (ClassSlot, DataClassSlot)}, the ContextVar its slots read)
_class_slots = _WeakIdCache()


def _forget_class_slots(cls: Any, name: str, slot: Any) -> None:
    """Drop the cached pair *slot* belongs to."""
    cached = _class_slots.get(cls)
    if cached is not None and slot in cached[0].get(name, ()):
        del cached[0][name]


def _class_slot_pair(cls: type, name: str) -> tuple[Any, Any]:
    """The cached pair of slots for ``cls.<name>``: for plain and for data-descriptor values."""
    cached = _class_slots.get(cls)
    if cached is None:
        cached = ({}, ACTIVATIONS)
        _class_slots.set(cls, cached)
    slots, var = cached
    pair = slots.get(name)
    if pair is None:
        pair = slots[name] = (ClassSlot(cls, name, var), DataClassSlot(cls, name, var))
    return pair  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------
# constructions

#: Python-level callers of ``cls.__new__(cls)`` that rebuild an existing object:
#: copy.copy/deepcopy and the pure-Python pickler go through these.
REBUILDERS = frozenset(
    {copyreg.__newobj__.__code__, copyreg.__newobj_ex__.__code__}  # type: ignore[attr-defined]
)

_NOT_APPLIED: Any = object()


class _PyDispatcher:
    """The ``__new__`` a construction redirect installs on its class, in both scopes.

    One per class, shared by all activations, so nested and concurrent
    activations install the identical object and never stack wrappers. A
    call builds this context's innermost open activation's replacement, else
    the most recent open process-scope one's, else constructs the class as
    it would without the dispatcher: through its own ``__new__`` (the
    entry's original) or the one it inherits (``base[0]``, refreshed at each
    activation). ``entries`` and ``key`` find the registry's entry.
    """

    __slots__ = (
        "__dict__",
        "base",
        "cls_ref",
        "displaced",
        "entries",
        "key",
        "rebuilders",
        "var",
    )

    def __init__(
        self,
        cls: type,
        var: contextvars.ContextVar[tuple[Any, ...]],
        base: list[Any],
        entries: dict[Any, Any],
        rebuilders: frozenset[Any],
    ) -> None:
        # Weak: the dispatcher is cached per class and must not keep it alive.
        self.cls_ref = weakref.ref(cls)
        self.key = (id(cls), "__new__")
        self.var = var
        self.base = base
        self.entries = entries
        self.rebuilders = rebuilders
        self.displaced: object = ABSENT

    def __call__(self, klass: type, *args: Any, **kwargs: Any) -> Any:
        cls: Any = self.cls_ref()
        if cls is None:
            raise TypeError("the class this __new__ was installed on no longer exists")
        for act in reversed(self.var.get()):
            if act._slot is self and act.open:
                built = self._build(cls, act._redirect._spec, klass, args, kwargs)
                if built is not _NOT_APPLIED:
                    return built
                break
        entry = self.entries.get(self.key)
        if entry is not None:
            for act in reversed(entry.stack):
                spec = act._redirect._spec
                if act.open and spec is not None and spec.process:
                    built = self._build(cls, spec, klass, args, kwargs)
                    if built is not _NOT_APPLIED:
                        return built
                    break
        # The class's own __new__: the entry's original, or (ABSENT there) what
        # the class holds now, when the last activation ended as this call began.
        raw = entry.original if entry is not None and entry.kind == OWN else ABSENT
        if raw is ABSENT:
            raw = cls.__dict__.get("__new__", ABSENT)
            if isinstance(raw, staticmethod) and raw.__func__ is self:
                raw = ABSENT
        if raw is not ABSENT:
            func: Any = raw.__func__ if isinstance(raw, staticmethod) else raw
            return func(klass, *args, **kwargs)
        base_new = self.base[0] if klass is cls else super(cls, klass).__new__  # type: ignore[misc]
        if base_new is OBJECT_NEW:
            if args or kwargs:
                # With a __new__ installed, object.__new__ rejects extra
                # arguments; without one it ignores them when __init__ is
                # overridden.
                return object_new(klass, *args, **kwargs)
            return OBJECT_NEW(klass)
        return base_new(klass, *args, **kwargs)

    def _build(
        self, cls: type, how: Any, klass: type, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Build the replacement if *how* applies to *klass*, else _NOT_APPLIED."""
        if not (klass is cls or (how.include_subclasses and klass is not how.replacement)):
            return _NOT_APPLIED
        # copy/deepcopy rebuild an existing instance: build the real class.
        # Frame 2 is the caller of cls.__new__ (_build is 0, __call__ 1).
        if sys._getframe(2).f_code in self.rebuilders:
            return _NOT_APPLIED
        replacement = how.replacement
        if how.subclass_replacement:
            # type.__call__ then runs replacement.__init__ exactly once.
            return replacement.__new__(replacement, *args, **kwargs)
        return replacement(*args, **kwargs)


_dispatchers: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()


def dispatcher(cls: type, entries: dict[Any, Any], lock: Any) -> Any:
    """The cached dispatcher of *cls*, wrapped as its ``__new__`` will be (a staticmethod).

    Under *lock*: two dispatchers for one class would each find only their
    own activations while only one of them is installed.
    """
    with lock:
        new = _dispatchers.get(cls)
        if new is None:
            disp = Dispatcher(cls, ACTIVATIONS, [OBJECT_NEW], entries, REBUILDERS)
            for attr, value in (
                ("__name__", "__new__"),
                ("__qualname__", f"{cls.__qualname__}.__new__"),
                ("__module__", cls.__module__),
                ("__doc__", None),
            ):
                setattr(disp, attr, value)
            try:
                shown = inspect.signature(cls)
            except (TypeError, ValueError):
                pass
            else:
                # inspect.signature(cls) reads __new__'s signature minus its
                # first parameter: keep showing the class's own signature.
                first = inspect.Parameter("cls", inspect.Parameter.POSITIONAL_ONLY)
                disp.__signature__ = shown.replace(parameters=[first, *shown.parameters.values()])
            new = _dispatchers[cls] = staticmethod(disp)
        return new


def inherited_new(cls: type) -> Any:
    """The ``__new__`` function *cls* gets from the classes after it in its MRO."""
    for klass in cls.__mro__[1:]:
        if "__new__" in klass.__dict__:
            raw = klass.__dict__["__new__"]
            return raw.__func__ if isinstance(raw, staticmethod) else raw
    return OBJECT_NEW


# ---------------------------------------------------------------------------
# putting slots in place for the registry (under its lock)


def displaced(raw: object) -> object:
    """The raw value one of our installed objects stands in place of; *raw* itself if not ours.

    A class left holding a slot or dispatcher nobody accounts for (after a
    fault) is restored to what it held before, never recorded with our
    object as its original.
    """
    tp = type(raw)
    if tp is ClassSlot or tp is DataClassSlot:
        return raw.displaced  # type: ignore[attr-defined]
    if tp is staticmethod and type(raw.__func__) is Dispatcher:  # type: ignore[attr-defined]
        return raw.__func__.displaced  # type: ignore[attr-defined]
    return raw


def seen_through(raw: object, context: bool) -> object:
    """The raw value a class slot of ours stands for; *raw* itself if not ours.

    With *context*, what this context's innermost open activation of the slot
    installed, if any; else, and without *context*, the process value; else
    what the class inherits (ABSENT: nothing). ``during()`` wraps what a
    method is where its wrapper will be seen (this context, or every
    context): wrapping the slot itself would make the slot serve the wrapper
    to itself.
    """
    tp = type(raw)
    if tp is not ClassSlot and tp is not DataClassSlot:
        return raw
    slot: Any = raw
    for act in reversed(slot.var.get() if context else ()):
        if act._slot is slot and act.open:
            return act._value
    if slot.fallback is not ABSENT:
        return slot.fallback
    cls = slot.cls_ref()
    for klass in cls.__mro__[1:] if cls is not None else ():
        if slot.name in klass.__dict__:
            return klass.__dict__[slot.name]
    return ABSENT


def _py_prepare(target: object, name: str) -> Any:
    """The cached slot(s) for ``target.<name>``: a module's ModuleSlot, a class's pair.

    Changes nothing the target shows.
    """
    if isinstance(target, types.ModuleType):
        return _module_slot(target, name)
    return _class_slot_pair(target, name)  # type: ignore[arg-type]


def _prepared(redirect: Any, target: object, name: str) -> Any:
    """``prepare(target, name)``, kept on the redirect for its next activation."""
    cached = redirect._prepared
    if cached is not None and (
        cached.dict is target.__dict__
        if isinstance(target, types.ModuleType)
        else cached[0].cls_ref() is target
    ):
        return cached
    redirect._prepared = found = prepare(target, name)
    return found


def install(entry: Any, act: Any, value: object) -> Any:
    """Put a slot in place for *entry*'s first open context activation *act*; return it.

    *value* is the process value. Modules switch to their private subclass
    (the dict keeps the value); a class gets the slot of the right kind,
    which the caller writes into its dict. Each step can be taken again
    after an interruption (see ``_registry``): ``entry.slot`` is set first,
    and a module's switch is recorded before it is made.
    """
    target, name = entry.target, entry.name
    if isinstance(target, types.ModuleType):
        slot = _prepared(act._redirect, target, name)
        entry.slot = slot
        swap = module_swaps.get(id(target))
        if swap is None or not swap[2]:
            # Not switched now: (re)start the record from the module's class.
            base = own_class(target)
            sub = slot.owner
            if sub.__base__ is not base:
                # The module's class changed since the slot was made.
                sub = module_class(base)
                slot.owner = sub
            if swap is None:
                swap = module_swaps[id(target)] = [base, sub, set()]
            else:
                swap[0], swap[1] = base, sub
        if swap[1].__dict__.get(name) is not slot:
            setattr(swap[1], name, slot)
        swap[2].add(name)
        if type(target) is not swap[1] and own_class(target) is swap[0]:
            # From its class, or a private subclass of it left by a fault; a
            # class somebody else gave it meanwhile stays.
            target.__class__ = swap[1]
        return slot
    plain, data = _prepared(act._redirect, target, name)
    raw = value if value is not ABSENT else lookup_mro(target, name)
    # Data descriptors (properties with setters, __slots__ members) keep
    # their precedence and their setter in every other context.
    slot = data if is_data_descriptor(raw) else plain
    slot.fallback = value
    slot.displaced = entry.original if entry.kind == OWN else ABSENT
    entry.slot = slot
    return slot


def uninstall(entry: Any) -> None:
    """Take *entry*'s slot away: a module gets its own class back with its last slot.

    A class's slot is already gone from its dict (the caller wrote the
    process value over it) and keeps its fallback: a reader in another
    thread may still be inside its ``__get__``. Can be taken again after an
    interruption.
    """
    target = entry.target
    if isinstance(target, types.ModuleType):
        swap = module_swaps.get(id(target))
        if swap is not None:
            swap[2].discard(entry.name)
            tp = type(target)
            if not swap[2] and tp is not swap[0] and is_private_module_class(tp):
                target.__class__ = swap[0]  # only from a class of ours
    else:
        slot = entry.slot
        slot.displaced = ABSENT
        # Out of the cache: what it still holds (its fallback, for a reader in
        # another thread still inside its __get__) goes with the last reader.
        _forget_class_slots(target, entry.name, slot)
    entry.slot = None


# Twins: the C accelerator's slots.c; keep in sync.
ModuleSlot: Any = twin(_PyModuleSlot, "ModuleSlot")
ClassSlot: Any = twin(_PyClassSlot, "ClassSlot")
DataClassSlot: Any = twin(_PyDataClassSlot, "DataClassSlot")
Dispatcher: Any = twin(_PyDispatcher, "Dispatcher")
module_class: Any = twin(_py_module_class, "module_class")
is_private_module_class: Any = twin(_py_is_private_module_class, "is_private_module_class")
prepare: Any = twin(_py_prepare, "prepare")
