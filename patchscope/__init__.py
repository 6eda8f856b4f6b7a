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
    from ._errors import (
        AttributeMissingError,
        PatchscopeError,
        RedirectConflictWarning,
        RestoreError,
        TargetNotWritableError,
        TargetResolutionError,
        UnsupportedTargetError,
    )
    from ._handles import Activation, ActivationGroup
    from ._redirect import Redirect, combine, during, redirect_attr
    from ._registry import active

# Each public name and the module defining it. They are imported on first
# access (PEP 562), so ``patchscope lint``, which imports ``patchscope.lint``
# and the error classes only, never imports the patching core or wrapt.
_LAZY = {
    "ACCELERATED": "._accel",
    "redirect_construction": "._construct",
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
    "combine": "._redirect",
    "during": "._redirect",
    "redirect_attr": "._redirect",
    "active": "._registry",
}


def __getattr__(name: str) -> Any:
    """Import the public names on the first access to any of them, then keep them here.

    All at once, so that the module's namespace changes once (usually while
    the first importer imports), not name by name while a program runs.
    """
    if name not in _LAZY:
        raise AttributeError(f"module 'patchscope' has no attribute {name!r}")
    import importlib

    namespace = globals()
    for public, module in _LAZY.items():
        namespace[public] = getattr(importlib.import_module(module, __name__), public)
    return namespace[name]


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
    "during",
    "redirect_attr",
    "redirect_construction",
]
