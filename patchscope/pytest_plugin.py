"""pytest plugin: the ``redirect`` fixtures and leak detection.

Registered through the ``pytest11`` entry point, so it is active once
patchscope is installed; ``-p no:patchscope`` turns it off.

Leak detection (``--patchscope-leaks`` / ``patchscope_leaks = off|warn|error``,
default ``warn``) looks at two things after each test's teardown:

* patchscope activations started during the test and still live, with the
  file:line where each was entered;
* attributes of the modules and classes named by ``patchscope_watch`` that
  differ from their snapshot taken before the test, whoever changed them
  (``mock.patch(...).start()`` without ``stop()``, a bare assignment).

Patches owned by wider-scoped fixtures are not leaks of the test during which
the fixture happened to be set up: what a class-, module-, package- or
session-scoped fixture starts or changes while it is set up, and what the
``redirect_class``/``redirect_module``/``redirect_session`` fixtures start,
is expected until that fixture is torn down, and is checked then.

Under ``warn`` a leak is reported as a :class:`~patchscope.testing.LeakWarning`
and left in place; under ``error`` it fails the test at teardown and is then
undone (activations stopped, watched attributes put back from the snapshot),
so later tests start clean. Nothing is printed when nothing leaked.

pytest runs hooks in one thread; the fixtures' objects are thread-safe (see
:class:`~patchscope.testing.RedirectFixture`).
"""

from __future__ import annotations

import os
import pkgutil
import types
import warnings
from collections.abc import Generator, Iterator
from typing import Any

import pytest

import patchscope
from patchscope._resolve import describe
from patchscope.testing import LeakWarning, RedirectFixture
from patchscope.testing._snapshot import Difference, Snapshot

_MODES = ("off", "warn", "error")
_GUARD = pytest.StashKey["_LeakGuard"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--patchscope-leaks`` and the ``patchscope_*`` ini settings."""
    group = parser.getgroup("patchscope", "patchscope leak detection")
    group.addoption(
        "--patchscope-leaks",
        choices=_MODES,
        default=None,
        dest="patchscope_leaks",
        help="what to do when a test leaves a patch behind: off, warn, or error "
        "(fail the test, then undo the leak). Overrides the patchscope_leaks ini "
        "setting; default: warn.",
    )
    parser.addini(
        "patchscope_leaks",
        "patchscope leak detection: off, warn (default) or error",
        default="warn",
    )
    parser.addini(
        "patchscope_watch",
        "dotted paths of modules or classes to snapshot before each test and "
        "compare after it (catches leaks from any patching tool)",
        type="args",
        default=[],
    )


def pytest_configure(config: pytest.Config) -> None:
    """Validate the settings and, unless leak detection is off, install the guard."""
    mode = config.getoption("patchscope_leaks") or config.getini("patchscope_leaks")
    if mode not in _MODES:
        raise pytest.UsageError(f"patchscope_leaks = {mode!r}: expected one of {', '.join(_MODES)}")
    if mode == "off":
        return
    watched = []
    for path in config.getini("patchscope_watch"):
        try:
            watched.append(pkgutil.resolve_name(path))
        except (ImportError, AttributeError, ValueError) as error:
            raise pytest.UsageError(f"patchscope_watch: cannot import {path!r}: {error}") from None
    guard = _LeakGuard(config, mode, tuple(watched))
    config.stash[_GUARD] = guard
    config.pluginmanager.register(guard, "patchscope-leak-guard")


def _redirect_fixture(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    fixture = RedirectFixture()
    # What a wider-scoped fixture starts is expected to outlive the test.
    guard = request.config.stash.get(_GUARD, None) if request.scope != "function" else None
    if guard is not None:
        guard.fixtures.append(fixture)
    try:
        yield fixture
    finally:
        try:
            fixture.undo()
        finally:
            if guard is not None:
                guard.fixtures.remove(fixture)


@pytest.fixture
def redirect(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    """Start redirects for one test; all are undone, newest first, at its teardown.

    ``redirect.attr(target, name, value, *, create=False, scope="process")`` and
    ``redirect.construction(cls, replacement, ...)`` return the activation.
    The object may be used from threads the test starts (see
    :class:`~patchscope.testing.RedirectFixture`).
    """
    yield from _redirect_fixture(request)


@pytest.fixture(scope="class")
def redirect_class(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    """Like ``redirect``, undone after the last test of the class."""
    yield from _redirect_fixture(request)


@pytest.fixture(scope="module")
def redirect_module(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    """Like ``redirect``, undone after the last test of the module."""
    yield from _redirect_fixture(request)


@pytest.fixture(scope="session")
def redirect_session(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    """Like ``redirect``, undone at the end of the session."""
    yield from _redirect_fixture(request)


class _FixtureRecord:
    """What one execution of a wider-scoped fixture started and changed."""

    __slots__ = ("activations", "changes", "finishing")

    def __init__(self, activations: list[patchscope.Activation], changes: list[Difference]) -> None:
        self.activations = activations
        self.changes = changes
        self.finishing: Snapshot | None = None


class _LeakGuard:
    """The hooks of leak detection, registered only when it is on."""

    def __init__(self, config: pytest.Config, mode: str, watched: tuple[object, ...]) -> None:
        self._config = config
        self._mode = mode
        self._watched = watched
        #: RedirectFixture objects of wider-scoped redirect_* fixtures now set up
        self.fixtures: list[RedirectFixture] = []
        #: activations started while wider-scoped fixtures were set up, by id
        self._owned: dict[int, patchscope.Activation] = {}
        self._records: dict[int, _FixtureRecord] = {}
        #: activations live when this test's setup began; held, so ids stay unique
        self._live: dict[int, patchscope.Activation] = {}
        self._expected: Snapshot | None = None
        #: activations that fixtures torn down during this test left live
        self._fixture_leaks: list[tuple[patchscope.Activation, str]] = []

    # -- before and after each test -------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        self._live = {id(a): a for a in patchscope.active()}
        self._expected = Snapshot(self._watched) if self._watched else None
        self._fixture_leaks = []
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        try:
            result = yield
        except BaseException:
            # The teardown failed already; report a leak without masking that.
            message = self._check(item)
            if message is not None:
                self._warn(item, message)
            raise
        message = self._check(item)
        if message is not None:
            if self._mode == "error":
                pytest.fail(message, pytrace=False)
            self._warn(item, message)
        return result

    def _check(self, item: pytest.Item) -> str | None:
        """Find this test's leaks; under ``error`` undo them. Return the report."""
        owned = dict(self._owned)
        owned.update((id(a), a) for fixture in self.fixtures for a in fixture.activations)
        fixture_leaked = {id(a) for a, _ in self._fixture_leaks}
        leaked = [
            a
            for a in patchscope.active()
            if id(a) not in self._live and id(a) not in owned and id(a) not in fixture_leaked
        ]
        leaked += [a for a, _ in self._fixture_leaks]
        expected = self._expected
        differences = expected.diff() if expected is not None else []
        if differences:
            assert expected is not None
            # Attributes that live redirects of wider-scoped fixtures hold are
            # expected to differ until those fixtures are torn down.
            held = {(id(a.target), a.name) for a in owned.values()}
            expected._accept(d for d in differences if (id(d.owner), d.name) in held)
            # A leaked activation's own attribute is reported once, as the
            # activation; so is the class swap a context-scope one makes on a
            # module.
            explained = {(id(a.target), a.name) for a in leaked}
            explained |= {
                (id(a.target), "__class__")
                for a in leaked
                if a.scope == "context" and isinstance(a.target, types.ModuleType)
            }
            differences = [d for d in expected.diff() if (id(d.owner), d.name) not in explained]
        if not leaked and not differences:
            return None
        by_fixture = {id(a): f", by fixture {name!r}" for a, name in self._fixture_leaks}
        lines = [f"{item.nodeid} left patches behind:"]
        lines += [f"  {self._render(a)}{by_fixture.get(id(a), '')}" for a in leaked]
        lines += [f"  {d}" for d in differences]
        if self._mode == "error":
            self._undo(leaked, expected)
            lines.append("patchscope undid them (--patchscope-leaks=error).")
        return "\n".join(lines)

    def _undo(self, leaked: list[patchscope.Activation], expected: Snapshot | None) -> None:
        errors: list[BaseException] = []
        for activation in reversed(leaked):
            try:
                activation.stop()
            except Exception as error:
                errors.append(error)
        if expected is not None:
            # After the stops, whatever still differs was changed by other tools.
            expected.restore()
        if errors:
            raise patchscope.RestoreError(
                "undoing leaked activations failed: " + "; ".join(map(str, errors)), errors
            )

    def _render(self, activation: patchscope.Activation) -> str:
        site = activation.site
        path, sep, line = site.rpartition(":")
        if sep and os.path.isabs(path):
            try:
                site = f"{os.path.relpath(path, self._config.rootpath)}:{line}"
            except ValueError:  # another drive on Windows
                pass
        return (
            f"activation {describe(activation.target)}.{activation.name} -> "
            f"{describe(activation.replacement)} (scope={activation.scope!r}) "
            f"entered at {site}"
        )

    def _warn(self, item: pytest.Item, message: str) -> None:
        path, lineno, _ = item.reportinfo()
        warnings.warn_explicit(
            LeakWarning(message),
            LeakWarning,
            filename=os.fspath(path),
            lineno=(lineno or 0) + 1,
        )

    # -- wider-scoped fixtures -------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        if fixturedef.scope == "function":
            return (yield)
        live = {id(a): a for a in patchscope.active()}
        before = Snapshot(self._watched)
        try:
            return (yield)
        finally:
            started = [a for a in patchscope.active() if id(a) not in live]
            record = _FixtureRecord(started, before.diff())
            self._owned.update((id(a), a) for a in started)
            if self._expected is not None:
                self._expected._accept(record.changes)
            self._records[id(fixturedef)] = record
            # Finalizers run newest first, so this one runs before the
            # fixture's own teardown, which pytest registered during setup.
            fixturedef.addfinalizer(lambda: self._finishing(record))

    def _finishing(self, record: _FixtureRecord) -> None:
        record.finishing = Snapshot(self._watched)

    def pytest_fixture_post_finalizer(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> None:
        record = self._records.pop(id(fixturedef), None)
        if record is None:
            return
        live = {id(a) for a in patchscope.active()} if record.activations else set()
        # A redirect_* fixture this one requested outlives it and undoes them.
        held = {id(a) for fixture in self.fixtures for a in fixture.activations}
        for activation in record.activations:
            self._owned.pop(id(activation), None)
            if id(activation) in live and id(activation) not in held:
                self._fixture_leaks.append((activation, fixturedef.argname))
        if self._expected is not None and record.finishing is not None:
            # The teardown's changes are expected, and so is every attribute
            # the setup changed going back to its value from before the setup.
            self._expected._accept(record.finishing.diff())
            self._expected._accept(
                Difference(d.owner, d.name, d.new, d.old) for d in record.changes
            )
