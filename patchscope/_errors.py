"""The package's exceptions and warnings.

Every error names the target and the attribute with ``!r`` and says how to fix
the problem. Each class derives from :class:`PatchscopeError` *and* from the
builtin exception a user of ``setattr``/``mock.patch`` would already catch, so
existing ``except AttributeError`` code keeps working.
"""

from __future__ import annotations


class PatchscopeError(Exception):
    """Base class of every error raised by patchscope itself.

    Catch this to handle any patchscope failure; the subclasses also derive
    from the builtin exception that the same mistake raises without patchscope.

    Thread safety: raised in the thread whose call failed; an instance holds
    only its message (and ``RestoreError.errors``) and may be handed to
    another thread.
    """


class TargetResolutionError(PatchscopeError, ImportError):
    """A dotted target path could not be imported or resolved.

    Derives from :class:`ImportError` because resolving a path imports modules,
    and that is what ``unittest.mock.patch`` raises for the same mistake.
    """


class AttributeMissingError(PatchscopeError, AttributeError):
    """The attribute to redirect does not exist and ``create=True`` was not passed.

    Derives from :class:`AttributeError`, the error reading the attribute gives.
    """


class TargetNotWritableError(PatchscopeError, TypeError):
    """The target refuses the write (immutable type, read-only property, slots, frozen).

    Derives from :class:`TypeError`: the target's type does not support the
    operation, which is what ``setattr`` raises on immutable builtin types.
    """


class UnsupportedTargetError(PatchscopeError, TypeError):
    """The requested scope cannot work on this kind of target.

    Derives from :class:`TypeError`: the target's type is the problem (e.g. a
    context-local redirect of an instance attribute); the message names the
    scope that works instead.
    """


class RestoreError(PatchscopeError):
    """One or more restores failed; the others still ran.

    ``errors`` holds the individual exceptions in the order they happened. It
    derives from :class:`PatchscopeError` only: a failed restore is a fault of
    the patched program (the target became read-only), not a usage error.
    """

    def __init__(self, message: str, errors: list[BaseException]) -> None:
        super().__init__(message)
        self.errors = errors

    def __reduce__(self) -> tuple[type[RestoreError], tuple[str, list[BaseException]]]:
        # Pickled with both arguments (multiprocessing and process pools carry
        # exceptions across), not only the message ``args`` holds.
        return (type(self), (str(self), self.errors))


class RedirectConflictWarning(UserWarning):
    """Someone else rebound a redirected attribute while the redirect was active.

    The redirect still restores the original when it ends; the warning names the
    target, the attribute and the value found, so the other writer can be found.

    Thread safety: issued in the thread whose activation began or ended when
    the rebinding was noticed, through :func:`warnings.warn`, so the warnings
    filters in force there decide what happens to it.
    """
