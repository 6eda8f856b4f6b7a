"""Redirect a torch name so that every name bound to its value is reached.

torch's functions are Python functions that scripts bind to names of their
own before any scope starts (``from torch.cuda import is_available``), and
that torch's modules store (Dynamo's ``CudaInterface``). Rebinding the
attribute reaches none of those; a call redirect
(:func:`patchscope.redirect_call`) reaches them all.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import Any, Literal

from patchscope import Redirect, redirect_attr, redirect_call
from patchscope._registry import entries, section
from patchscope._resolve import ABSENT

Scope = Literal["context", "process"]

_CO_VARARGS = 0x04
_CO_VARKEYWORDS = 0x08


def defined(owner: Any, name: str) -> Any:
    """``owner.name`` as it is when nothing redirects it (None where it is absent then).

    Redirects are built at a first activation, which may come while another
    scope (another thread's ``scope="process"`` one, an outer one of another
    device count) has the name rebound to its stand-in: the registry holds
    what the name was before the first of them.
    """
    with section:
        entry = entries.get((id(owner), name))
        if entry is not None:
            return None if entry.original is ABSENT else entry.original
    return getattr(owner, name, None)


def reaching_every_name(
    owner: Any,
    name: str,
    replacement: Any,
    scope: Scope,
    seen: set[int],
    create: bool = False,
) -> list[Redirect]:
    """The redirect of ``owner.name`` to ``replacement``, reaching every name bound to it.

    A Python function is redirected by call (:func:`patchscope.redirect_call`),
    so that ``from torch.cuda import is_available`` made before the scope,
    and references torch's own modules stored (Dynamo's ``CudaInterface``),
    are reached; one function that several names share (``torch.cuda``
    re-exports ``torch.cuda.memory``'s) is redirected once, by its first
    name. Anything else (a class, a builtin, a name to create) is rebound by
    name.
    """
    value = defined(owner, name)
    if isinstance(value, types.FunctionType):
        if id(value) in seen or replacement is value:
            # Redirected once already, or its own stand-in (which a call
            # redirect would make call itself): nothing to add.
            return []
        seen.add(id(value))
        return [redirect_call(value, called_as(value, replacement), scope=scope)]
    return [redirect_attr(owner, name, replacement, create=create, scope=scope)]


def called_as(function: types.FunctionType, replacement: Any) -> Any:
    """``replacement``, taking what a call redirect of ``function`` passes it.

    A call redirect passes the function's parameters as its signature binds
    them, defaults filled in: positional-or-keyword ones positionally,
    keyword-only ones by keyword, ``*args`` and ``**kwargs`` forwarded. A
    stand-in written for the documented call
    (``torch.cuda.get_device_name(device=None)``) takes them as they come;
    one of another signature (a backend's function of an older release) gets
    the parameters it names, by name, its positional-only ones by position,
    and the rest only where it takes ``*args``/``**kwargs``.
    """
    try:
        # Through __wrapped__: a stand-in that maps a backend function's
        # device (functools.wraps) takes what that function takes.
        wanted = inspect.signature(replacement)
    except (TypeError, ValueError):
        return replacement
    code = function.__code__
    count = code.co_argcount
    names = code.co_varnames[:count]
    keyword_only = code.co_varnames[count : count + code.co_kwonlyargcount]
    parameters = list(wanted.parameters.values())
    takes_varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    takes_varkw = any(p.kind is p.VAR_KEYWORD for p in parameters)
    forwards_varargs = bool(code.co_flags & _CO_VARARGS)
    forwards_varkw = bool(code.co_flags & _CO_VARKEYWORDS)
    try:
        wanted.bind(*names, **dict.fromkeys(keyword_only))
    except TypeError:
        pass
    else:
        if (takes_varargs or not forwards_varargs) and (takes_varkw or not forwards_varkw):
            return replacement
    positional_only = sum(p.kind is p.POSITIONAL_ONLY for p in parameters)
    by_name = {
        p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }

    @functools.wraps(replacement)
    def call(*args: Any, **kwargs: Any) -> Any:
        values = dict(zip(names[positional_only:], args[positional_only:count], strict=False))
        values.update(kwargs)
        given = list(args[:positional_only])
        if takes_varargs:
            given += args[count:]
        kept = {k: v for k, v in values.items() if takes_varkw or k in by_name}
        return replacement(*given, **kept)

    return call
