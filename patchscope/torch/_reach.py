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

Scope = Literal["context", "process"]


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
    value = getattr(owner, name, None)
    if isinstance(value, types.FunctionType):
        if id(value) in seen:
            return []
        seen.add(id(value))
        return [redirect_call(value, called_as(value, replacement), scope=scope)]
    return [redirect_attr(owner, name, replacement, create=create, scope=scope)]


def called_as(function: types.FunctionType, replacement: Any) -> Any:
    """``replacement``, taking what a call redirect of ``function`` passes it.

    A call redirect passes the function's parameters as its signature binds
    them, defaults filled in. A stand-in written for the documented call
    (``torch.cuda.get_device_name(device=None)``) takes them; one that takes
    fewer (a backend's function of an older signature) gets those it has.
    """
    try:
        wanted = inspect.signature(replacement)
    except (TypeError, ValueError):
        return replacement
    code = function.__code__
    positional = code.co_argcount
    keyword_only = code.co_varnames[positional : positional + code.co_kwonlyargcount]
    try:
        wanted.bind(*range(positional), **dict.fromkeys(keyword_only))
        return replacement
    except TypeError:
        pass
    parameters = list(wanted.parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return replacement
    takes = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)
    names = {p.name for p in parameters if p.kind is p.KEYWORD_ONLY}
    any_keyword = any(p.kind is p.VAR_KEYWORD for p in parameters)

    @functools.wraps(replacement)
    def call(*args: Any, **kwargs: Any) -> Any:
        kept = {k: v for k, v in kwargs.items() if any_keyword or k in names}
        return replacement(*args[:takes], **kept)

    return call
