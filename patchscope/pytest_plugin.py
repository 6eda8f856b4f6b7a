"""pytest plugin: the ``redirect`` fixtures and leak detection.

Registered through the ``pytest11`` entry point, so it is active once
patchscope is installed; ``-p no:patchscope`` turns it off.

Leak detection (``--patchscope-leaks`` / ``patchscope_leaks = off|warn|error``,
default ``warn``; ``@pytest.mark.patchscope(leaks=...)`` for one test) looks
at two things after each test's teardown:

* patchscope activations started during the test and still live, with the
  file:line where each was entered;
* attributes of the modules and classes named by ``patchscope_watch`` that
  differ from their snapshot taken before the test, whoever changed them
  (``mock.patch(...).start()`` without ``stop()``, a bare assignment), except
  those ``patchscope_watch_ignore`` names. Watch paths are imported when the
  tests are about to run, after collection has put the project on
  ``sys.path``; ``--help``, ``--fixtures`` and ``--collect-only`` never
  import them. Under pytest-xdist each worker imports them and checks its
  tests; the controller, which runs none, does neither. One object may be
  watched under several names, and ignored under any of them.

Patches owned by wider-scoped fixtures are not leaks of the test during which
the fixture happened to be set up: what a class-, module-, package- or
session-scoped fixture starts or changes while it is set up, and what the
``redirect_class``/``redirect_module``/``redirect_package``/``redirect_session``
fixtures start, is expected until that fixture is torn down. What such a
fixture leaves behind after its teardown is reported then, naming the fixture,
under the run's mode: the marker of the test being torn down sets the mode of
that test's own leaks only.

Not leaks: what the interpreter and pytest set (``sys.last_type``,
``sys.last_value``, ``sys.last_traceback``, ``sys.last_exc``), a module's own
lazy state (see :class:`patchscope.testing.Snapshot`), and an attribute found
at teardown as another plugin's ``tryfirst`` ``pytest_runtest_setup`` hook set
it (the watched objects are compared once more, just before the fixtures are
set up). A change reported once and made again, identically, by later tests
is counted and listed at the end of the run, not reported per test. A leak
report is a failure whatever the test's ``xfail`` marker says.

Under ``warn`` a leak is reported as a :class:`patchscope.testing.LeakWarning`
and left in place, unless the warnings filter turns that warning into an error
(``filterwarnings = error``): then, as under ``error``, the test errors at
teardown and the leak is undone (activations stopped, watched attributes put
back from the snapshot), so later tests start clean. Nothing is printed when
nothing leaked.

pytest runs hooks in one thread; the fixtures' objects are thread-safe (see
:class:`~patchscope.testing.RedirectFixture`).
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import sys
import types
import warnings
from collections.abc import Generator, Iterable, Iterator
from fnmatch import fnmatchcase
from typing import Any

import pytest
from _pytest.outcomes import Failed

import patchscope
from patchscope._resolve import describe
from patchscope.testing import LeakWarning, RedirectFixture
from patchscope.testing._pytest_options import MARKER, add_options
from patchscope.testing._pytest_options import MODES as _MODES
from patchscope.testing._snapshot import Difference, Snapshot, _current, _put, _same

#: What the interpreter and pytest themselves set, never a test's patch:
#: ``sys.last_*`` hold the last uncaught exception (pytest sets them when a
#: test's call raises, for post-mortem debugging).
_DEFAULT_IGNORE = frozenset({"last_type", "last_value", "last_traceback", "last_exc"})
_GLOB = frozenset("*?[")
_GUARD = pytest.StashKey["_LeakGuard"]()
#: The mode a test's ``@pytest.mark.patchscope(leaks=...)`` chose.
_MODE = pytest.StashKey[str]()


#: No attribute is set to this by a setup hook.
_NOT_HOOKED = object()


class _LeakError(Failed):
    """A leak found at teardown: a failure whatever the test's xfail marker says."""

    # Reported as pytest.fail's exception is: "Failed: <the report>".
    __module__ = "builtins"
    __qualname__ = __name__ = "Failed"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--patchscope-leaks`` and the ``patchscope_*`` ini settings."""
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Validate the settings and, unless leak detection is off, install the guard."""
    config.addinivalue_line("markers", MARKER)
    mode = config.getoption("patchscope_leaks") or config.getini("patchscope_leaks")
    if mode not in _MODES:
        raise pytest.UsageError(f"patchscope_leaks = {mode!r}: expected one of {', '.join(_MODES)}")
    if mode == "off":
        return
    guard = _LeakGuard(
        config, mode, config.getini("patchscope_watch"), config.getini("patchscope_watch_ignore")
    )
    config.stash[_GUARD] = guard
    config.pluginmanager.register(guard, "patchscope-leak-guard")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check every ``@pytest.mark.patchscope`` and remember the mode it chose."""
    for item in items:
        marker = item.get_closest_marker("patchscope")
        if marker is None:
            continue
        leaks = marker.kwargs.get("leaks")
        if marker.args or set(marker.kwargs) != {"leaks"} or leaks not in _MODES:
            given = [repr(arg) for arg in marker.args]
            given += [f"{key}={value!r}" for key, value in marker.kwargs.items()]
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.patchscope({', '.join(given)}): "
                "expected leaks='off', 'warn' or 'error'"
            )
        item.stash[_MODE] = leaks


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

    ``redirect.attr(target, name, value, *, create=False, scope="process")``,
    ``redirect.attr("pkg.mod.name", value, ...)`` and
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


@pytest.fixture(scope="package")
def redirect_package(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    """Like ``redirect``, with pytest's package scope (as pytest-mock's ``package_mocker``).

    pytest ends a package-scoped fixture after the last test of the package
    that defines it; a plugin's fixture is defined outside every package, so
    pytest keeps this one until the session ends.
    """
    yield from _redirect_fixture(request)


@pytest.fixture(scope="session")
def redirect_session(request: pytest.FixtureRequest) -> Iterator[RedirectFixture]:
    """Like ``redirect``, undone at the end of the session."""
    yield from _redirect_fixture(request)


def _diff(snapshot: Snapshot) -> tuple[list[Difference], list[str]]:
    """The differences, and a line for each object that could not be compared."""
    differences: list[Difference] = []
    broken: list[str] = []
    for obj, found in snapshot._compare():
        if isinstance(found, Exception):
            broken.append(f"{describe(obj)} cannot be compared with its snapshot: {found!r}")
        else:
            differences += found
    return differences, broken


def _restore(snapshot: Snapshot) -> None:
    """``snapshot.restore()`` for every object that can still be compared."""
    for _, found in snapshot._compare():
        if not isinstance(found, Exception):
            for difference in found:
                _put(difference.owner, difference.name, difference.old)


def _where(fixturedef: pytest.FixtureDef[Any], root: os.PathLike[str]) -> str:
    """``path:line`` of a fixture's function, relative to *root* where it can be."""
    try:
        function = inspect.unwrap(fixturedef.func)
        path = inspect.getsourcefile(function) or inspect.getfile(function)
        line = function.__code__.co_firstlineno
    except (TypeError, AttributeError, OSError):
        return "?"
    try:
        relative = os.path.relpath(path, root)
    except ValueError:  # another drive on Windows
        relative = os.pardir
    return f"{path if relative.startswith(os.pardir) else relative}:{line}"


class _FixtureRecord:
    """What one execution of a wider-scoped fixture started and changed."""

    __slots__ = ("activations", "before", "changes", "finishing", "heading", "live")

    def __init__(self, fixturedef: pytest.FixtureDef[Any], before: Snapshot, root: Any) -> None:
        self.heading = (
            f"fixture {fixturedef.argname!r} (scope={fixturedef.scope!r}, defined at "
            f"{_where(fixturedef, root)}) left patches behind at its teardown:"
        )
        self.before = before
        #: activations live when its setup began, and those of fixtures set up inside it
        self.live = {id(a): a for a in patchscope.active()}
        self.activations: list[patchscope.Activation] = []
        self.changes: list[Difference] = []
        self.finishing: Snapshot | None = None


class _Found:
    """The leaks one teardown found: the report and what undoes them."""

    __slots__ = ("activations", "kept", "lines", "puts")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.activations: list[patchscope.Activation] = []
        #: fixtures' changes to put back, as (owner, name, value)
        self.puts: list[Difference] = []
        #: the differences from the snapshot that remain if these leaks stay
        self.kept: list[Difference] = []

    def add(self, other: _Found) -> None:
        """Report and undo *other*'s leaks with these."""
        self.lines += other.lines
        self.activations += other.activations
        self.puts += other.puts
        self.kept += other.kept


class _LeakGuard:
    """The hooks of leak detection, registered only when it is on."""

    def __init__(
        self, config: pytest.Config, mode: str, paths: list[str], ignore: list[str]
    ) -> None:
        self._config = config
        self._mode = mode
        self._paths = paths
        self._ignore_exact = {p.replace(":", ".") for p in ignore if not _GLOB & set(p)}
        self._ignore_globs = [p.replace(":", ".") for p in ignore if _GLOB & set(p)]
        #: the watched objects, once the run begins
        self._watched: tuple[object, ...] = ()
        #: the dotted names each watched object is watched under, by id
        self._names: dict[int, list[str]] = {}
        #: RedirectFixture objects of wider-scoped redirect_* fixtures now set up
        self.fixtures: list[RedirectFixture] = []
        #: activations started while wider-scoped fixtures were set up, by id
        self._owned: dict[int, patchscope.Activation] = {}
        self._records: dict[int, _FixtureRecord] = {}
        #: records of wider-scoped fixtures whose setup is running, outermost first
        self._opening: list[_FixtureRecord] = []
        #: activations live when this test's setup began; held, so ids stay unique
        self._live: dict[int, patchscope.Activation] = {}
        self._expected: Snapshot | None = None
        #: whether _expected still records the watched objects exactly
        self._current = False
        #: what fixtures torn down during this test left behind
        self._fixture_leaks: list[_Found] = []
        #: what other plugins' setup hooks set watched attributes to, by (id, name)
        self._hooked: dict[tuple[int, str], object] = {}
        #: each reported attribute change, and how often it was seen again since
        self._seen: dict[tuple[int, str], list[Any]] = {}

    # -- the watched objects ---------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Import the watch paths, now that collection has set up ``sys.path``."""
        config = session.config
        option = config.option
        if option.collectonly or (session.testsfailed and not option.continue_on_collection_errors):
            return  # no test will run; pytest's own runtestloop reports why
        if config.pluginmanager.hasplugin("dsession") and not hasattr(config, "workerinput"):
            # pytest-xdist's controller runs no test and collects nothing, so
            # the project may not be on its sys.path; each worker watches.
            return
        watched: dict[int, tuple[object, list[str]]] = {}
        for path in self._paths:
            try:
                # A warning at import is the module's to show when the suite
                # imports it; under filterwarnings = error it would stop the run.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    obj = pkgutil.resolve_name(path)
            except Exception as error:
                raise pytest.UsageError(
                    f"patchscope_watch: cannot import {path!r}: {error!r}. If it is part of "
                    "this project, put its folder on sys.path with the pythonpath ini "
                    "setting (pythonpath = . or pythonpath = src)"
                ) from None
            try:
                vars(obj)
            except TypeError:
                raise pytest.UsageError(
                    f"patchscope_watch: {path!r} is {describe(obj)}, which has no attributes "
                    "to watch; watch its module or class"
                ) from None
            # One object may be watched under several names (os.path and
            # posixpath); an ignore entry may use any of them.
            watched.setdefault(id(obj), (obj, []))[1].append(path.replace(":", "."))
        self._watched = tuple(obj for obj, _ in watched.values())
        self._names = {key: names for key, (_, names) in watched.items()}
        names = {name for each in self._names.values() for name in each}
        for entry in sorted(self._ignore_exact):
            owner = entry.rpartition(".")[0]
            if owner not in names:
                raise pytest.UsageError(
                    f"patchscope_watch_ignore: {entry!r} is not an attribute of a watched "
                    f"object: add {owner!r} to patchscope_watch, or correct the entry"
                )

    def _ignored(self, owner: object, name: str) -> bool:
        if owner is sys and name in _DEFAULT_IGNORE:
            return True
        for owner_name in self._names.get(id(owner), ()):
            dotted = f"{owner_name}.{name}"
            if dotted in self._ignore_exact or any(
                fnmatchcase(dotted, glob) for glob in self._ignore_globs
            ):
                return True
        return False

    # -- before and after each test -------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        off = item.stash.get(_MODE, self._mode) == "off"
        self._live = {} if off else {id(a): a for a in patchscope.active()}
        if off or not self._watched:
            self._expected = None
        elif not self._current:
            # Between the last test's teardown, which found the watched
            # objects exactly as recorded, and this setup only pytest's
            # reporting hooks ran: that snapshot still serves, uncopied.
            self._expected = Snapshot(self._watched)
        self._current = False
        self._hooked = {}
        self._fixture_leaks = []
        return (yield)

    @pytest.hookimpl(specname="pytest_runtest_setup")
    def pytest_runtest_setup_hooks(self, item: pytest.Item) -> None:
        """Record what other plugins' ``tryfirst`` setup hooks switched on.

        A plain hook implementation: called after every ``tryfirst`` one (and
        inside every hook wrapper) and before pytest's own, which sets up the
        fixtures. An attribute found at teardown as these hooks set it is
        theirs, not the test's: pyfakefs resumes a wider-scoped fake file
        system there, pytest's output capture swaps ``sys.stdout``.
        """
        if item.stash.get(_MODE, self._mode) == "off":
            return
        self._live.update((id(a), a) for a in patchscope.active())
        if self._expected is not None:
            differences, _ = _diff(self._expected)
            self._hooked = {(id(d.owner), d.name): d.new for d in differences}

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        try:
            result = yield
        except BaseException:
            # The teardown failed already; report leaks without masking that.
            self._report(item, failed=True)
            raise
        self._report(item, failed=False)
        return result

    def _report(self, item: pytest.Item, failed: bool) -> None:
        """Warn about or error for this teardown's leaks, and undo those that error.

        The test's marker decides for the test's own leaks only; what fixtures
        torn down now leave behind is theirs, reported under the run's mode.
        After a *failed* teardown every leak is reported as a warning.
        """
        mode = item.stash.get(_MODE, self._mode)
        own, by_fixtures = self._check(item, own=mode != "off")
        parts: dict[str, _Found] = {}
        for found, part_mode in ((own, mode), (by_fixtures, self._mode)):
            if found is not None:
                parts.setdefault(part_mode, _Found()).add(found)
        if not parts:
            if not failed:
                self._current = self._expected is not None and self._expected._identical
            return
        undo = _Found()
        notes: list[str] = []
        for part_mode, found in parts.items():
            if not found.lines:
                # Only changes reported before, seen again: counted, not reported.
                if part_mode == "warn":
                    if self._expected is not None:
                        self._expected._accept(found.kept)
                else:
                    undo.add(found)
                continue
            message = "\n".join(found.lines)
            why = "leaks=error"
            if part_mode == "warn" or failed:
                try:
                    self._warn(item, message)
                except LeakWarning:
                    why = "the warnings filter turned the LeakWarning into an error"
                else:
                    if part_mode == "warn":
                        if self._expected is not None:
                            # Left in place, so not for _undo's restore to put back.
                            self._expected._accept(found.kept)
                        continue
            undo.add(found)
            notes.append(f"{message}\npatchscope undid them ({why}).")
        if notes or undo.kept or undo.puts:
            self._undo(undo)
        if notes and not failed:
            raise _LeakError("\n".join(notes), pytrace=False)

    def _check(self, item: pytest.Item, own: bool) -> tuple[_Found | None, _Found | None]:
        """This test's leaks (if *own*), and those of the fixtures torn down in its teardown."""
        by_fixtures: _Found | None = None
        if self._fixture_leaks:
            by_fixtures = _Found()
            for by_fixture in self._fixture_leaks:
                by_fixtures.add(by_fixture)
        fixtures_leaked = by_fixtures.activations if by_fixtures is not None else []
        if not own:
            return None, by_fixtures
        owned = dict(self._owned)
        owned.update((id(a), a) for fixture in self.fixtures for a in fixture.activations)
        leaked = [
            a
            for a in patchscope.active()
            if id(a) not in self._live and id(a) not in owned and a not in fixtures_leaked
        ]
        expected = self._expected
        differences, broken = _diff(expected) if expected is not None else ([], [])
        explained: list[Difference] = []
        if differences:
            assert expected is not None
            # Attributes that live redirects of wider-scoped fixtures hold are
            # expected to differ until those fixtures are torn down; ignored
            # ones may differ at any time.
            held = {(id(a.target), a.name) for a in owned.values()}
            hooked = self._hooked
            accepted = [
                d
                for d in differences
                if (id(d.owner), d.name) in held
                or self._ignored(d.owner, d.name)
                or _same(hooked.get((id(d.owner), d.name), _NOT_HOOKED), d.new)
            ]
            expected._accept(accepted)
            by_activations, differences = _split(_diff(expected)[0], fixtures_leaked)
            if by_fixtures is not None:
                by_fixtures.kept += by_activations
            explained, differences = _split(differences, leaked)
        repeated, differences = self._repeats(differences)
        if not leaked and not differences and not broken:
            if not repeated:
                return None, by_fixtures
            found = _Found()
            found.kept += repeated
            return found, by_fixtures
        found = _Found()
        found.lines.append(f"{item.nodeid} left patches behind:")
        found.lines += [f"  {self._render(a)}" for a in leaked]
        found.lines += [f"  {d}" for d in differences]
        found.lines += [f"  {line}" for line in broken]
        found.activations += leaked
        found.kept += explained + differences + repeated
        self._remember(differences)
        return found, by_fixtures

    def _remember(self, reported: list[Difference]) -> None:
        """Record *reported* changes, so that the same change again is only counted."""
        for difference in reported:
            self._seen.setdefault((id(difference.owner), difference.name), [difference, 0])

    def _repeats(self, differences: list[Difference]) -> tuple[list[Difference], list[Difference]]:
        """*differences* split into changes already reported once this run, and the rest.

        A change is the same when the attribute goes from the same old value
        to the same new one (compared as a snapshot compares values); each
        repeat is counted for the summary at the end of the run.
        """
        if not self._seen:
            return [], differences
        repeated: list[Difference] = []
        fresh: list[Difference] = []
        for difference in differences:
            first = self._seen.get((id(difference.owner), difference.name))
            if (
                first is not None
                and _same(first[0].old, difference.old)
                and _same(first[0].new, difference.new)
            ):
                first[1] += 1
                repeated.append(difference)
            else:
                fresh.append(difference)
        return repeated, fresh

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Keep a leak a failure: pytest's xfail handling would count it as expected."""
        report = yield
        if (
            call.when == "teardown"
            and call.excinfo is not None
            and isinstance(call.excinfo.value, _LeakError)
            and hasattr(report, "wasxfail")
        ):
            report.outcome = "failed"
            del report.wasxfail
        return report

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """List each reported change that later tests made again, with how often."""
        repeats = [(difference, count) for difference, count in self._seen.values() if count]
        if not repeats:
            return
        terminalreporter.section("patchscope: leaks seen again")
        for difference, count in repeats:
            times = "1 more test" if count == 1 else f"{count} more tests"
            terminalreporter.line(
                f"{difference}: reported once, then made again by {times} (not reported again)"
            )

    def _undo(self, found: _Found) -> None:
        errors: list[BaseException] = []
        for activation in reversed(found.activations):
            try:
                activation.stop()
            except Exception as error:
                errors.append(error)
        expected = self._expected
        for put in found.puts:
            try:
                _put(put.owner, put.name, put.old)
            except Exception as error:
                errors.append(error)
        if expected is not None:
            expected._accept(Difference(d.owner, d.name, d.new, d.old) for d in found.puts)
            # After the stops, whatever still differs was changed by other tools.
            _restore(expected)
        if errors:
            raise patchscope.RestoreError(
                "undoing leaked patches failed: " + "; ".join(map(str, errors)), errors
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
        record = _FixtureRecord(fixturedef, Snapshot(self._watched), self._config.rootpath)
        self._opening.append(record)
        try:
            return (yield)
        finally:
            self._opening.pop()
            record.activations = [a for a in patchscope.active() if id(a) not in record.live]
            record.changes = _diff(record.before)[0]
            # What this fixture did is not what a fixture it was set up inside
            # of (through request.getfixturevalue) did.
            for outer in self._opening:
                outer.live.update((id(a), a) for a in record.activations)
                outer.before._accept(record.changes)
            self._owned.update((id(a), a) for a in record.activations)
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
        held_activations = [a for fixture in self.fixtures for a in fixture.activations]
        held = {id(a) for a in held_activations}
        found = _Found()
        for activation in record.activations:
            self._owned.pop(id(activation), None)
            if id(activation) in live and id(activation) not in held:
                found.activations.append(activation)
        if record.finishing is not None:
            teardown = _diff(record.finishing)[0]
            if self._expected is not None:
                # The teardown's changes are the fixture's, and so is every
                # attribute its setup changed going back to its value from
                # before the setup.
                self._expected._accept(teardown)
                self._expected._accept(
                    Difference(d.owner, d.name, d.new, d.old) for d in record.changes
                )
            held_names = {(id(a.target), a.name) for a in held_activations}
            held_names |= {(id(a.target), a.name) for a in found.activations}
            touched = {(id(d.owner), d.name): d.owner for d in [*record.changes, *teardown]}
            for (key, name), owner in touched.items():
                if (key, name) in held_names or self._ignored(owner, name):
                    continue
                try:
                    before, now = record.before._recorded(owner, name), _current(owner, name)
                except Exception:  # a broken object: the next test's check reports it
                    continue
                if not _same(before, now):
                    found.puts.append(Difference(owner, name, before, now))
            if self._expected is not None:
                # Blamed on the fixture, so not on the test being torn down.
                self._expected._accept(found.puts)
        if found.activations or found.puts:
            # Still undone under error; reported only the first time.
            _, fresh = self._repeats(found.puts)
            if found.activations or fresh:
                found.lines.append(record.heading)
                found.lines += [f"  {self._render(a)}" for a in found.activations]
                found.lines += [f"  {d}" for d in fresh]
                self._remember(fresh)
            self._fixture_leaks.append(found)


def _split(
    differences: Iterable[Difference], leaked: list[patchscope.Activation]
) -> tuple[list[Difference], list[Difference]]:
    """*differences* split into those a leaked activation explains and the rest.

    A leaked activation's own attribute is reported once, as the activation;
    so is the class swap a context-scope one makes on a module.
    """
    explained = {(id(a.target), a.name) for a in leaked}
    explained |= {
        (id(a.target), "__class__")
        for a in leaked
        if a.scope == "context" and isinstance(a.target, types.ModuleType)
    }
    by_leaked: list[Difference] = []
    rest: list[Difference] = []
    for difference in differences:
        key = (id(difference.owner), difference.name)
        (by_leaked if key in explained else rest).append(difference)
    return by_leaked, rest
