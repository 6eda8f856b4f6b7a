"""``RedirectFixture``: what the pytest plugin's ``redirect`` fixtures hand out."""

from __future__ import annotations

import threading
from typing import Any, Final, TypeAlias, overload

import patchscope
from patchscope._resolve import split_path

_Handle: TypeAlias = "patchscope.Activation | patchscope.ActivationGroup"

#: ``attr(target, name)`` without a value: the one-dotted-string form.
_NOTSET: Final = object()


def _start(redirect: patchscope.Redirect) -> _Handle:
    """``redirect.start()``, entered at the site of the test code that called us.

    Leak reports should point at the test's ``redirect.attr(...)`` line, two
    frames above this helper.
    """
    return redirect.start(stacklevel=3)


class RedirectFixture:
    """Starts redirects and undoes them all, newest first, on :meth:`undo`.

    The pytest fixtures ``redirect``, ``redirect_class``, ``redirect_module``,
    ``redirect_package`` and ``redirect_session`` are instances whose
    :meth:`undo` runs at the teardown of their scope, also when the test failed.

    Thread safety: :meth:`attr`, :meth:`construction` and :meth:`undo` may be
    called from any thread; a lock guards the list of activations.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handles: list[_Handle] = []

    @overload
    def attr(
        self, path: str, value: object, /, *, create: bool = ..., scope: str = ...
    ) -> _Handle: ...

    @overload
    def attr(
        self, target: object, name: str, value: object, *, create: bool = ..., scope: str = ...
    ) -> _Handle: ...

    def attr(
        self,
        target: object,
        name: Any,
        value: object = _NOTSET,
        *,
        create: bool = False,
        scope: str = "process",
    ) -> _Handle:
        """Start ``patchscope.redirect_attr(target, name, value, ...)``; return the activation.

        ``attr("pkg.mod.name", value)`` is the same as
        ``attr("pkg.mod", "name", value)``, like ``mocker.patch("os.getcwd")``
        and ``monkeypatch.setattr("os.getcwd", value)``: the module is
        imported, and a missing attribute is an error unless ``create=True``.
        A *value* of :data:`patchscope.DELETE` hides the attribute until
        teardown, like ``monkeypatch.delattr``.
        """
        if value is _NOTSET:
            value = name
            target, name = split_path(target, value, "redirect.attr", "value")
        redirect = patchscope.redirect_attr(target, name, value, create=create, scope=scope)
        return self._keep(_start(redirect))

    def construction(
        self,
        cls: type,
        replacement: Any,
        *,
        scope: str = "context",
        include_subclasses: bool = False,
    ) -> _Handle:
        """Start ``redirect_construction(cls, replacement, ...)``; return the activation."""
        redirect = patchscope.redirect_construction(
            cls, replacement, scope=scope, include_subclasses=include_subclasses
        )
        return self._keep(_start(redirect))

    def _keep(self, handle: _Handle) -> _Handle:
        with self._lock:
            self._handles.append(handle)
        return handle

    @property
    def activations(self) -> tuple[patchscope.Activation, ...]:
        """The activations started here and not yet undone, oldest first."""
        with self._lock:
            return tuple(a for handle in self._handles for a in handle.activations)

    def undo(self) -> None:
        """Stop every activation started here, newest first.

        Every stop runs even if one fails; then the failure is raised (a
        ``RestoreError`` listing them all when there are several).
        """
        with self._lock:
            handles = self._handles[::-1]
            self._handles.clear()
        errors: list[BaseException] = []
        for handle in handles:
            try:
                handle.stop()
            except Exception as error:
                errors.append(error)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise patchscope.RestoreError(
                f"{len(errors)} of {len(handles)} redirects failed to restore: "
                + "; ".join(map(str, errors)),
                errors,
            )
