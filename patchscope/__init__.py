"""patchscope: scoped monkey-patching with exact restoration.

``redirect_attr`` rebinds a name (process-wide or only for the current thread
or asyncio task), ``redirect_construction`` intercepts every construction of a
class through any alias, ``combine`` and ``during`` group and attach redirects,
and ``active()`` lists what is live. Every public object here is thread-safe;
see each docstring for its contract. ``import patchscope`` imports neither
torch nor pytest nor hypothesis.

``ACCELERATED`` is true when the optional C accelerator is in use and false
when the pure-Python twins run; the behaviour is the same either way. The
accelerator is in the platform wheels and is built by ``pip install`` from
source where a C compiler is available, on CPython 3.10 to 3.15 with the GIL;
a build without it warns once and gives a ``py3-none-any`` wheel, and
``PATCHSCOPE_PURE_PYTHON=1`` turns it off at run time. It is decided once, at
import, and is a constant: reading it is safe from any thread.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._accel import ACCELERATED
    from ._construct import redirect_construction
    from ._during import deferred, during
    from ._errors import (
        AttributeMissingError,
        PatchscopeError,
        RedirectConflictWarning,
        RestoreError,
        TargetNotWritableError,
        TargetResolutionError,
        UnsupportedTargetError,
    )
    from ._group import combine
    from ._handles import Activation, ActivationGroup
    from ._redirect import Redirect, redirect_attr
    from ._registry import active, exclusive

# Each public name and the module it comes from. They are imported on first
# access (PEP 562), so ``patchscope lint``, which needs the error classes at
# most, never imports the patching core or wrapt.
_LAZY = {
    "ACCELERATED": "._accel",
    "AttributeMissingError": "._errors",
    "PatchscopeError": "._errors",
    "RedirectConflictWarning": "._errors",
    "RestoreError": "._errors",
    "TargetNotWritableError": "._errors",
    "TargetResolutionError": "._errors",
    "UnsupportedTargetError": "._errors",
    "Activation": "._handles",
    "ActivationGroup": "._handles",
    "Redirect": "._redirect",
    "active": "._registry",
    "combine": "._group",
    "deferred": "._during",
    "during": "._during",
    "exclusive": "._registry",
    "redirect_attr": "._redirect",
    "redirect_construction": "._construct",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access, then keep the name here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'patchscope' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the ones not yet imported included."""
    return sorted({*globals(), *_LAZY})


__version__ = "0.1.0"

__all__ = [
    "ACCELERATED",
    "Activation",
    "ActivationGroup",
    "AttributeMissingError",
    "PatchscopeError",
    "Redirect",
    "RedirectConflictWarning",
    "RestoreError",
    "TargetNotWritableError",
    "TargetResolutionError",
    "UnsupportedTargetError",
    "active",
    "combine",
    "deferred",
    "during",
    "exclusive",
    "redirect_attr",
    "redirect_construction",
]
