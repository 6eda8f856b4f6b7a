"""redirect_call: every call of a Python function, through any name bound to it.

``from torch.cuda import is_available`` binds the function object itself: a
``setattr`` on ``torch.cuda`` leaves that name, references stored elsewhere
and bound methods taken earlier alone. What every one of them shares is the
function object, and what a call of it runs is its ``__code__``. So while any
call redirect of a function is live, its ``__code__`` is code of ours that
asks the function's :class:`CallDispatcher` what to run:

- a plain function runs its own code with a check in front of the body
  (``_prologue``): ``active(body)`` answers, in C, whether a redirect applies
  to this call; if not, the body runs in the same frame, and if so
  ``choose()``'s answer is called with the parameters;
- a generator, coroutine or async generator function (whose body starts
  later than its call), or code the check cannot be spliced into exactly,
  runs a *trampoline*: a code object with the function's own parameters
  (names, kinds, count of free variables) and kind that calls ``choose()``'s
  answer with its parameters.

``choose()`` answers this context's innermost open activation's replacement,
else the most recently entered open process-scope one's, else a *shadow*: a
function made from the original code, the function's globals and its
closure. The function keeps its identity, signature, defaults, name,
``__doc__`` and ``__dict__``; only ``__code__`` changes, process-wide.

To the registry a call redirect is a process-scope redirect of
``func.__code__`` (a data descriptor of functions: the ``SETATTR`` kind, which
restores through ``setattr`` and detects somebody else's assignment) to that
code; in context scope each activation is also pushed onto
``_slots.ACTIVATIONS`` with the dispatcher as its slot, as constructions are.

The code holds the dispatcher among its constants (a function's
``__globals__`` and ``__closure__`` are read-only, and its defaults must not
change), inside a carrier code object that torch.compile can trace, and
reaches it as ``<carrier>.co_consts[0]``. Generators delegate with
``yield from``, coroutines with ``await``, and async generators forward
``asend``/``athrow``/``aclose`` by hand; for those three kinds the choice is
made when the body starts (the first ``next()``/``send()``/``await``), in the
context that starts it, since calling them runs none of their code.
"""

from __future__ import annotations

import contextvars
import keyword
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

from . import _prologue
from ._accel import twin
from ._errors import UnsupportedTargetError
from ._redirect import Redirect, RedirectCore, activate, check_scope, with_enter, with_exit
from ._registry import entries, section
from ._resolve import SETATTR, describe
from ._slots import ACTIVATIONS

_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08
_CO_GENERATOR = 0x20
_CO_COROUTINE = 0x80
_CO_ITERABLE_COROUTINE = 0x100
_CO_ASYNC_GENERATOR = 0x200
_KINDS = _CO_GENERATOR | _CO_COROUTINE | _CO_ASYNC_GENERATOR

#: The constant the source of our code reaches the dispatcher through, replaced
#: by a carrier: a code object (never run) whose only constant is the dispatcher.
#: torch.compile (Dynamo) traces a LOAD_CONST only of literals and code
#: objects, and asserts on anything else; ``carrier.co_consts[0]`` it reads as
#: any other attribute.
_PLACEHOLDER = "patchscope:call-dispatcher"
_CARRIER = compile(repr(_PLACEHOLDER), "<patchscope call dispatcher>", "eval")


class _PyCallDispatcherBase:
    """The fields of a call dispatcher, and its choice: what a call of the function runs now.

    ``shadow`` is the function that runs the original code, ``entries`` and
    ``key`` find the registry's entry, ``var`` holds this context's
    activations.
    """

    __slots__ = ("__weakref__", "entries", "key", "shadow", "var")
    entries: dict[Any, Any]
    key: tuple[int, str]
    shadow: Any  # a function (a FunctionType annotation would read as a method)
    var: contextvars.ContextVar[tuple[Any, ...]]

    def _find(self) -> tuple[Any, Any]:
        """(the replacement a call runs now or None, the registry's entry or None).

        The replacement is this context's innermost open activation's, else
        the newest open process-scope call activation's.
        """
        for act in reversed(self.var.get()):
            if act._slot is self and act.open:
                return act._redirect._replacement, None
        entry = self.entries.get(self.key)
        if entry is not None:
            for act in reversed(entry.stack):
                # Not some other redirect of this function's __code__: call
                # redirects carry the dispatcher's own key object.
                if act.open and act._slot is None and act._redirect._key is self.key:
                    return act._redirect._replacement, entry
        return None, entry

    def choose(self) -> Any:
        """What a call runs now: the replacement ``_find`` gives, else the original's shadow.

        The shadow is rebuilt if the function's code was replaced between
        two scopes.
        """
        replacement, entry = self._find()
        if replacement is not None:
            return replacement
        # A call that began as the last activation ended finds no entry.
        if entry is not None:
            original = entry.original
            if type(original) is types.CodeType:
                runs = self._runs(original)
                if self.shadow.__code__ is not runs:
                    self.shadow = _shadow(self.shadow, runs)
        return self.shadow

    def _runs(self, code: types.CodeType) -> types.CodeType:
        """The body *code* runs where no redirect applies: itself, unless this dispatcher made it.

        Code made by it (its carrier, a constant whose first constant is the
        dispatcher, is among *code*'s), saved during a scope and assigned
        back after it, is what the registry restores next time: checked
        code runs the body after its check, the first code constant after
        the carrier (``_prologue.build`` appends the carrier, then the
        body); a trampoline runs the shadow. So the shadow never gets code
        that would ask this dispatcher again.
        """
        consts = code.co_consts
        for i, const in enumerate(consts):
            if type(const) is types.CodeType and const.co_consts and const.co_consts[0] is self:
                for later in consts[i + 1 :]:
                    if type(later) is types.CodeType:
                        return later  # checked code: the body it was built from
                shadow_code: types.CodeType = self.shadow.__code__
                return shadow_code  # a trampoline runs the shadow
        return code

    def active(self, body: types.CodeType) -> bool:
        """Whether a call of the function, whose code runs *body*, must run ``choose()``'s answer.

        Also when *body* is not the original the registry restores: code
        built before somebody else replaced the function's is stale, and
        ``choose()`` runs the current original.
        """
        replacement, entry = self._find()
        if replacement is not None:
            return True
        if entry is None or entry.original is body:
            return False
        original = entry.original
        return type(original) is not types.CodeType or self._runs(original) is not body


# Twin: the C accelerator's CallDispatcherBase (call.c); keep in sync.
if TYPE_CHECKING:
    CallDispatcherBase = _PyCallDispatcherBase
else:
    CallDispatcherBase = twin(_PyCallDispatcherBase, "CallDispatcherBase")


class CallDispatcher(CallDispatcherBase):
    """What a redirected function's code asks what to run: one per function.

    Shared by all call redirects of the function, so nested and concurrent
    activations install the identical code while the function's original is
    the same (see ``_dispatcher``).
    """

    __slots__ = ("built_from", "code_ref", "func_ref")
    #: Weak, to the newest code made for the function (which holds the
    #: dispatcher among its constants: code objects are invisible to the
    #: garbage collector, so a strong reference would be a cycle never
    #: collected).
    code_ref: weakref.ref[types.CodeType]

    # What the async-generator trampoline's ``except`` clauses name: reached
    # through the dispatcher, never through the function's globals.
    StopAsyncIteration = StopAsyncIteration
    GeneratorExit = GeneratorExit
    BaseException = BaseException

    def __init__(self, func: types.FunctionType, original: types.CodeType) -> None:
        # Weak: the function may die while a redirect of it is cached.
        self.func_ref = weakref.ref(func)
        self.key = (id(func), "__code__")
        self.var = ACTIVATIONS  # what the registry pushes this context's activations onto
        self.entries = entries
        self.built_from: types.CodeType | None = None  # the original code_ref's code runs
        self.shadow = _shadow(func, original)


def _shadow(model: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    """A function that runs *code* as *model* would: its globals, name and closure.

    Our code passes every parameter, so it needs no defaults.
    """
    shadow = types.FunctionType(code, model.__globals__, model.__name__, None, model.__closure__)
    shadow.__qualname__ = model.__qualname__
    return shadow


def _parameters(code: types.CodeType) -> tuple[list[str], list[str], list[str], str, str]:
    """(positional-only, positional-or-keyword, keyword-only, *args name, **kwargs name)."""
    names = code.co_varnames
    posonly = code.co_posonlyargcount
    count = code.co_argcount
    kwonly = code.co_kwonlyargcount
    i = count + kwonly
    varargs = varkw = ""
    if code.co_flags & _CO_VARARGS:
        varargs = names[i]
        i += 1
    if code.co_flags & _CO_VARKEYWORDS:
        varkw = names[i]
    return (
        list(names[:posonly]),
        list(names[posonly:count]),
        list(names[count : count + kwonly]),
        varargs,
        varkw,
    )


def _unique(taken: set[str], stem: str) -> str:
    """*stem*, with underscores added until it is not in *taken*.

    The callers' stems differ in more than trailing underscores, so the
    names made from one set never collide with each other.
    """
    name = stem
    while name in taken:
        name += "_"
    return name


def _passing(code: types.CodeType) -> tuple[str, str]:
    """(*code*'s parameter list, the arguments that pass each on), as source.

    Positional parameters are passed positionally, keyword-only ones by
    keyword, ``*args`` and ``**kwargs`` forwarded.
    """
    posonly, positional, kwonly, varargs, varkw = _parameters(code)
    params: list[str] = []
    if posonly:
        params += [*posonly, "/"]
    params += positional
    if varargs:
        params.append(f"*{varargs}")
    elif kwonly:
        params.append("*")
    params += kwonly
    if varkw:
        params.append(f"**{varkw}")
    args = [*posonly, *positional]
    if varargs:
        args.append(f"*{varargs}")
    args += [f"{k}={k}" for k in kwonly]
    if varkw:
        args.append(f"**{varkw}")
    return ", ".join(params), ", ".join(args)


def _trampoline(original: types.CodeType, disp: CallDispatcher) -> types.CodeType:
    """The code a redirected function runs: *original*'s parameters, kind and free variables.

    It calls ``disp.choose()`` and calls what that gives with its parameters:
    positional ones positionally, keyword-only ones by keyword, ``*args`` and
    ``**kwargs`` forwarded. Compiled from source inside an outer function
    whose locals are the free variables' names, so it has as many free
    variables as the function's closure (assigning ``__code__`` checks that);
    it never reads them.
    """
    posonly, positional, kwonly, varargs, varkw = _parameters(original)
    freevars = list(original.co_freevars)
    taken = {*posonly, *positional, *kwonly, varargs, varkw, *freevars}
    params, args = _passing(original)
    disp_expr = f"{_PLACEHOLDER!r}.co_consts[0]"
    call = f"{disp_expr}.choose()({args})"
    flags = original.co_flags
    if flags & _CO_ASYNC_GENERATOR:
        agen, value, sent, exc = (_unique(taken, n) for n in ("agen", "value", "sent", "exc"))
        ph = disp_expr
        body = [
            "async def trampoline({params}):",
            f"    {agen} = {call}",
            "    try:",
            f"        {value} = await {agen}.__anext__()",
            f"    except {ph}.StopAsyncIteration:",
            "        return",
            "    while True:",
            "        try:",
            f"            {sent} = yield {value}",
            f"        except {ph}.GeneratorExit:",
            f"            await {agen}.aclose()",
            "            raise",
            f"        except {ph}.BaseException as {exc}:",
            "            try:",
            f"                {value} = await {agen}.athrow({exc})",
            f"            except {ph}.StopAsyncIteration:",
            "                return",
            "        else:",
            "            try:",
            f"                {value} = await {agen}.asend({sent})",
            f"            except {ph}.StopAsyncIteration:",
            "                return",
        ]
    elif flags & _CO_COROUTINE:
        body = ["async def trampoline({params}):", f"    return await {call}"]
    elif flags & _CO_GENERATOR:
        body = ["def trampoline({params}):", f"    return (yield from {call})"]
    else:
        body = ["def trampoline({params}):", f"    return {call}"]
    lines = ["def outer():"]
    if freevars:
        lines.append(f"    {' = '.join(freevars)} = None")
    lines += ["    " + line.replace("{params}", params) for line in body]
    if freevars:
        # Referenced where it never runs: free variables, never read.
        lines[-len(body) + 1 : -len(body) + 1] = [f"        if 0: ({', '.join(freevars)},)"]
    source = "\n".join(lines) + "\n"
    module = compile(source, original.co_filename, "exec", dont_inherit=True)
    outer = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    code = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    carrier = _CARRIER.replace(co_consts=(disp,))
    consts = tuple(carrier if type(c) is str and c == _PLACEHOLDER else c for c in code.co_consts)
    changes: dict[str, Any] = {
        "co_consts": consts,
        "co_name": original.co_name,
        "co_firstlineno": original.co_firstlineno,
        # types.coroutine marks a generator function's code as awaitable.
        "co_flags": code.co_flags | (flags & _CO_ITERABLE_COROUTINE),
    }
    if sys.version_info >= (3, 11):
        changes["co_qualname"] = original.co_qualname
    return code.replace(**changes)


#: id(function) -> the function's dispatcher, while something (a redirect, an
#: installed code) keeps that alive.
_dispatchers: weakref.WeakValueDictionary[int, CallDispatcher] = weakref.WeakValueDictionary()


def dispatcher_of(code: object) -> CallDispatcher | None:
    """The dispatcher whose code *code* is (a trampoline or a checked original), else None."""
    if type(code) is types.CodeType:
        for const in code.co_consts:
            if type(const) is types.CodeType and const.co_filename == _CARRIER.co_filename:
                disp = const.co_consts[0] if const.co_consts else None
                if type(disp) is CallDispatcher:
                    return disp
    return None


def _original_code(func: types.FunctionType) -> types.CodeType:
    """The code *func* runs when nothing redirects it; under the registry lock."""
    entry = entries.get((id(func), "__code__"))
    if entry is not None and entry.kind == SETATTR and type(entry.original) is types.CodeType:
        code = entry.original
    else:
        code = func.__code__
    disp = dispatcher_of(code)
    # Code of ours nothing accounts for (a fault, or code saved during a scope
    # and assigned back after it): the body it runs (a Python helper, so it
    # serves the C dispatcher too).
    return _PyCallDispatcherBase._runs(disp, code) if disp is not None else code


def _redirected_code(original: types.CodeType, disp: CallDispatcher) -> types.CodeType:
    """What the function runs while redirected: *original* behind a check, else a trampoline.

    The check (see ``_prologue``) serves plain functions; generator,
    coroutine and async generator functions, and code the check cannot be
    spliced into exactly, get a trampoline.
    """
    if not original.co_flags & _KINDS:
        carrier = _CARRIER.replace(co_consts=(disp,))
        params, args = _passing(original)
        code = _prologue.build(original, carrier, params, args, _PLACEHOLDER)
        if code is not None:
            return code
    return _trampoline(original, disp)


def _dispatcher(func: types.FunctionType) -> tuple[CallDispatcher, types.CodeType]:
    """The function's dispatcher and the code a redirect of it installs, made on first use.

    Under the registry lock. One dispatcher serves the function for as long
    as anything keeps it alive (a redirect, installed code), so that nested
    and concurrent activations all go on it; its code is made again when the
    function's original code changed. Whatever keeps a dispatcher alive
    keeps the code it was made for alive too, but only the caller holds new
    code until a redirect takes it.
    """
    with section:
        original = _original_code(func)
        disp = _dispatchers.get(id(func))
        if disp is None or disp.func_ref() is not func:
            disp = _dispatchers[id(func)] = CallDispatcher(func, original)
        code = disp.code_ref() if disp.built_from is original else None
        if code is None:
            code = _redirected_code(original, disp)
            disp.code_ref = weakref.ref(code)
            disp.built_from = original
        return disp, code


class CallRedirect(Redirect, RedirectCore):
    """Calls of a function run the replacement while active (see redirect_call)."""

    __slots__ = ()

    def __init__(self, func: types.FunctionType, replacement: Any, scope: str) -> None:
        RedirectCore.__init__(self)
        disp, code = _dispatcher(func)
        self._name = "__code__"
        self._create = False
        # Context scope is the dispatcher's business: the registry installs the
        # code process-wide and pushes each activation onto its variable.
        self._ctx = False
        self._target = func
        self._replacement = replacement
        self._scope = scope
        self._value = code
        self._key = disp.key  # the dispatcher's own key object: compared by identity
        if scope == "context":
            self._slot = disp

    def _args(self) -> tuple[Any, ...]:
        return (self._target, self._replacement, self._scope)

    _activate = activate
    __enter__ = with_enter
    __exit__ = with_exit

    def __repr__(self) -> str:
        return (
            f"redirect_call({describe(self._target)}, {self._replacement!r}, scope={self._scope!r})"
        )


_C_CALLABLES = (
    types.BuiltinFunctionType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.MethodDescriptorType,
    types.ClassMethodDescriptorType,
)


def _check_function(func: object, caller: str) -> types.FunctionType:
    """*func* if it is a Python function, else the error saying what to pass instead."""
    if isinstance(func, types.FunctionType):
        posonly, positional, kwonly, varargs, varkw = _parameters(func.__code__)
        for param in (*posonly, *positional, *kwonly, varargs or "a", varkw or "a"):
            if not param.isidentifier() or keyword.iskeyword(param):
                raise UnsupportedTargetError(
                    f"{caller}() cannot redirect {describe(func)}: its parameter "
                    f"{param!r} is not a name a call can pass"
                )
        return func
    if isinstance(func, type):
        raise TypeError(
            f"{caller}() needs a Python function, got the class {describe(func)}; "
            "use redirect_construction() to redirect constructions of a class"
        )
    if isinstance(func, (staticmethod, classmethod, types.MethodType)):
        inner = func.__func__
        kind = "bound method" if isinstance(func, types.MethodType) else type(func).__name__
        hint = (
            f"pass the function it wraps, {caller}({describe(inner)}, ...) "
            "(obj.__func__): every call of it is redirected, through any binding"
            if isinstance(inner, types.FunctionType)
            else "use redirect_attr() on the name it is called through"
        )
        raise TypeError(f"{caller}() needs a Python function, got the {kind} {func!r}; {hint}")
    if isinstance(func, _C_CALLABLES):
        raise UnsupportedTargetError(
            f"{caller}() cannot redirect {func!r}: it is a builtin or C function, whose "
            "code cannot be replaced; use redirect_attr() on the name it is called through"
        )
    if not callable(func):
        raise TypeError(
            f"{caller}() needs a Python function, got {type(func).__name__} {func!r}, "
            "which is not callable"
        )
    raise TypeError(
        f"{caller}() needs a Python function, got {type(func).__name__} {func!r}; pass the "
        "Python function it calls, or use redirect_attr() on the name it is called through"
    )


def redirect_call(func: Any, replacement: Any, *, scope: str = "context") -> Redirect:
    """Every call of the Python function *func* runs *replacement* while active.

    Reaches every name bound to the function (``from torch.cuda import
    is_available``, references stored on other objects, bound methods taken
    earlier, a staticmethod's function), because it replaces what the
    function object runs: while any call redirect of it is live,
    ``func.__code__`` is its own code behind a check (a trampoline for
    generator, coroutine and async generator functions), and it is the
    original again by identity when the last one ends. *replacement* is
    called with *func*'s parameters as its signature binds them (defaults
    filled in): positional(-or-keyword) ones positionally, keyword-only ones
    by keyword, ``*args``/``**kwargs`` forwarded. :func:`patchscope.original`
    gives a callable that runs the original code, for replacements that wrap
    it.

    The function's identity, ``inspect.signature``, ``__name__``,
    ``__doc__``, ``__defaults__``, ``__kwdefaults__``, ``__dict__`` and kind
    (``inspect.isgeneratorfunction``, ``iscoroutinefunction``,
    ``isasyncgenfunction``) never change. A generator, coroutine or async
    generator function's trampoline is of the same kind and delegates to
    what the replacement returns; the choice is made when its body starts
    (the first ``next()``, ``send()`` or ``await``), in the context that
    starts it. Somebody else assigning ``func.__code__`` while redirected is
    reported as a :class:`~patchscope.RedirectConflictWarning`. Builtins and
    C functions, classes (use :func:`redirect_construction`), methods and
    other callables are refused.

    Thread safety: ``scope="context"`` (default) affects only the activating
    thread/asyncio task (and tasks it creates while the scope is open); other
    threads call the original at the same time. ``scope="process"`` affects
    every thread. Activations may end in any order from any thread.
    """
    function = _check_function(func, "redirect_call")
    if not callable(replacement):
        raise TypeError(
            f"redirect_call({describe(function)}, ...): the replacement must be "
            f"callable, got {type(replacement).__name__} {replacement!r}"
        )
    return CallRedirect(function, replacement, check_scope(scope))


def original(func: Any) -> Any:
    """A function that runs *func*'s original code, even while calls of *func* are redirected.

    It has *func*'s globals, closure, name, defaults, keyword defaults and
    annotations as they are now (so the same signature); call it from a
    replacement that wraps *func*. For a function nothing redirects it runs
    what *func* runs.

    Thread-safe: the original is read under the registry's lock.
    """
    function = _check_function(func, "original")
    with section:
        code = _original_code(function)
    made = types.FunctionType(
        code, function.__globals__, function.__name__, function.__defaults__, function.__closure__
    )
    made.__qualname__ = function.__qualname__
    made.__module__ = function.__module__
    made.__doc__ = function.__doc__
    if function.__kwdefaults__ is not None:
        made.__kwdefaults__ = dict(function.__kwdefaults__)
    if hasattr(function, "__annotate__"):
        # 3.14+: annotations are evaluated on first access (PEP 649); keep them lazy.
        made.__annotate__ = function.__annotate__  # type: ignore[attr-defined]
    else:
        made.__annotations__ = function.__annotations__
    return made
