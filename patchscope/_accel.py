"""The one switch between the C accelerator and the pure-Python twins.

``patchscope._speedups`` is an optional C extension (``pip install`` builds it
where a C compiler and the Python headers are available). It holds C twins of
a small, named set of the package's types and functions, each with the
signature of its Python twin; the list is in ``patchscope/_c/speedups.h``. The
Python twins are the reference: they are what runs when the extension is
absent or ``PATCHSCOPE_PURE_PYTHON=1`` is set, and the test suite runs in full
against both. Every module that has a twin picks it here and nowhere else,
through :func:`twin`; :func:`configure` hands the C code, once, the Python
objects it works with.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

#: What switches a PATCHSCOPE_* variable off; anything else switches it on.
#: setup.py reads PATCHSCOPE_REQUIRE_ACCELERATOR the same way.
_OFF = frozenset({"", "0", "false", "no", "off"})


def _flag(name: str) -> bool:
    """Whether the environment variable *name* is set to something that means on."""
    return os.environ.get(name, "").strip().lower() not in _OFF


def _load() -> Any:
    if _flag("PATCHSCOPE_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module("patchscope._speedups")
    except ModuleNotFoundError as exc:
        if exc.name != "patchscope._speedups":
            raise  # something the package itself needs is missing
        return None  # not built: the Python twins serve
    except ImportError as exc:
        # Built, but it does not load (another interpreter's build, a damaged
        # file): run the same code in pure Python, and say so.
        warnings.warn(
            f"patchscope: the C accelerator patchscope._speedups is installed but does not "
            f"load ({exc}); running in pure Python, which behaves the same but is slower. "
            "Reinstall patchscope for this interpreter, or set PATCHSCOPE_PURE_PYTHON=1 "
            "to silence this.",
            RuntimeWarning,
            stacklevel=_outside_stacklevel(),
        )
        return None


def _outside_stacklevel() -> int:
    """The ``stacklevel`` that names the first frame outside patchscope, for its caller.

    A warning at import time then points at the user's ``import`` line, not at
    this module. ``warnings`` itself skips the import machinery's frames when
    it counts, so they are not counted here either.
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level = 1
    frame = sys._getframe(1).f_back
    while frame is not None:
        filename = frame.f_code.co_filename
        if not ("importlib" in filename and "_bootstrap" in filename):
            level += 1
            if not filename.startswith(package):
                break
        frame = frame.f_back
    return level


#: The C extension module when it is in use, else None.
speedups: Any = _load()
#: True when the C accelerator is in use, False when the Python twins run:
#: the extension was not built (a py3-none-any wheel, a build without a C
#: compiler, an interpreter it does not support), is installed but does not
#: load (a RuntimeWarning says why), or PATCHSCOPE_PURE_PYTHON=1 was set.
#: Behaviour is the same either way. Decided once, at import; a constant,
#: safe to read from any thread.
ACCELERATED = speedups is not None


def twin(python: Any, name: str) -> Any:
    """The implementation of one contract item: its C twin *name* when accelerated, else *python*.

    *name* is the item's name in ``patchscope._speedups`` (``"Entry"``,
    ``"RedirectCore._c_activate"``), as ``patchscope/_c/speedups.h`` lists
    it. *python* is None for a C quick check that has no Python twin of its
    own (the caller's code is the reference). Called at import by the module
    that defines *python*; the answer never changes afterwards.
    """
    if speedups is None:
        return python
    found: Any = speedups
    for part in name.split("."):
        found = getattr(found, part)
    return found


def twin_function(python: Callable[..., Any], name: str, *args: Any) -> Callable[..., Any]:
    """A public function, or its C twin: the C type *name* built from *python* and *args*.

    The twin carries *python*'s ``__doc__``, ``__signature__`` and
    ``__wrapped__`` and takes the same arguments; it may hand a call shape it
    does not take to *python*.
    """
    if speedups is None:
        return python
    return functools.update_wrapper(getattr(speedups, name)(python, *args), python)


def configure() -> None:
    """Give the C code, once, the Python objects it works with; nothing when it is not in use.

    The C code never looks up a module's globals or private names: the
    handle classes it creates, the registry's table and lock, the with-stack
    and the exceptions it raises are passed here by keyword. Called once, at
    the end of ``_handles.py``: the handle classes are the last of these
    objects to exist, and every module that makes a record the C operations
    work on imports that one first (a pickled redirect unpickled in a fresh
    process included).
    """
    if speedups is None:
        return
    from . import _cpython, _errors, _handles, _pairing, _registry, _resolve, _slots

    speedups.configure(
        activation_type=_handles.Activation,
        group_type=_handles.ActivationGroup,
        absent=_resolve.ABSENT,
        entries=_registry.entries,
        swaps=_slots.module_swaps,
        lock=_registry.lock,
        with_stack=_pairing.with_stack,
        enter_context=_pairing.ENTER_CONTEXT,
        new_standin=_cpython.OBJECT_NEW_STANDIN,
        core_modules=_registry.CORE_MODULES,
        conflict_warning=_errors.RedirectConflictWarning,
        restore_error=_errors.RestoreError,
        not_writable_error=_errors.TargetNotWritableError,
        missing_error=_errors.AttributeMissingError,
        unsupported_error=_errors.UnsupportedTargetError,
        activations=_slots.ACTIVATIONS,
    )
