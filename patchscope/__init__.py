"""patchscope: scoped monkey-patching with exact restoration.

``redirect_attr`` rebinds a name (process-wide or only for the current thread
or asyncio task), ``redirect_construction`` intercepts every construction of a
class through any alias, ``redirect_call`` every call of a Python function
through any name bound to it, ``combine`` and ``during`` group and attach redirects,
and ``active()`` lists what is live; ``redirect_attr(target, name, DELETE)``
hides an attribute while active. Every public object here is thread-safe;
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
    from ._call import original, redirect_call
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
    from ._resolve import ABSENT as DELETE

# The public names are imported on first access (PEP 562), so ``patchscope
# lint``, which needs the error classes at most, never imports the patching
# core or wrapt. _load binds them all at once through ``global`` statements:
# the leak detection of patchscope's own plugin (and a reader) sees them as
# this module's first-use cache, not as a patch.


def _load() -> None:
    """Bind every public name in this module's globals."""
    global ACCELERATED, DELETE, Activation, ActivationGroup, Redirect
    global AttributeMissingError, PatchscopeError, RedirectConflictWarning, RestoreError
    global TargetNotWritableError, TargetResolutionError, UnsupportedTargetError
    global active, combine, deferred, during, exclusive, original
    global redirect_attr, redirect_call, redirect_construction
    from ._accel import ACCELERATED
    from ._call import original, redirect_call
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
    from ._resolve import ABSENT as DELETE


def __getattr__(name: str) -> Any:
    """Import the public names on the first access to one of them."""
    if name not in __all__:
        raise AttributeError(f"module 'patchscope' has no attribute {name!r}")
    _load()
    return globals()[name]


def __dir__() -> list[str]:
    """The module's names, the ones not yet imported included."""
    return sorted({*globals(), *__all__})


__version__ = "0.1.0"

__all__ = [
    "ACCELERATED",
    "DELETE",
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
    "original",
    "redirect_attr",
    "redirect_call",
    "redirect_construction",
]
