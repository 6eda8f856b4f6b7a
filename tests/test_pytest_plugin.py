"""Tests of the pytest plugin, run through pytester."""

from __future__ import annotations

from collections.abc import Iterator

import hypothesis  # noqa: F401
import pytest

import patchscope
from patchscope.testing import RedirectFixture

pytest_plugins = ["pytester"]

# hypothesis is imported above because pytester's in-process runs drop the
# modules they imported: its pytest plugin would import it afresh every run.

HELPER = """
value = "orig"
other = "other"
"""


@pytest.fixture(autouse=True)
def _stop_what_inner_runs_left() -> Iterator[None]:
    """Inner runs share this process's registry; stop what they left live."""
    before = {id(a) for a in patchscope.active()}
    yield
    for activation in patchscope.active():
        if id(activation) not in before:
            activation.stop()


@pytest.fixture
def tester(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester directory with an importable ``helper`` module to patch."""
    pytester.makepyfile(helper=HELPER)
    pytester.makeini("[pytest]\npythonpath = .\n")
    return pytester


def _ini(pytester: pytest.Pytester, *lines: str) -> None:
    pytester.makeini("\n".join(["[pytest]", "pythonpath = .", *lines]) + "\n")


# -- the redirect fixtures ----------------------------------------------------


def test_redirect_undoes_at_teardown_even_when_the_test_fails(tester: pytest.Pytester) -> None:
    """Redirects made through the fixture are undone after a failing test."""
    tester.makepyfile(
        """
        import helper

        def test_patch_and_fail(redirect):
            redirect.attr(helper, "value", "patched")
            redirect.attr(helper, "added", 1, create=True)
            assert helper.value == "patched"
            raise RuntimeError("the test fails")

        def test_after():
            assert helper.value == "orig"
            assert not hasattr(helper, "added")
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=1, failed=1)


def test_redirect_returns_the_activation(tester: pytest.Pytester) -> None:
    """attr() and construction() return activations that can be stopped early."""
    tester.makepyfile(
        """
        import helper
        import patchscope

        class Thing:
            pass

        class Other:
            pass

        def test_handles(redirect):
            handle = redirect.attr(helper, "value", "patched")
            construction = redirect.construction(Thing, Other)
            assert isinstance(Thing(), Other)
            assert {id(a) for a in patchscope.active()} == {
                id(a) for a in handle.activations + construction.activations
            }
            handle.stop()
            assert helper.value == "orig"
        """
    )
    tester.runpytest("--patchscope-leaks=error").assert_outcomes(passed=1)


def test_redirect_fixture_undoes_newest_first() -> None:
    """undo() restores newest first and still restores the rest when one restore fails."""
    writes: list[tuple[str, object]] = []

    class Logged:
        def __init__(self, label: str) -> None:
            self.__dict__.update(label=label, _x="orig")

        @property
        def x(self) -> object:
            return self.__dict__["_x"]

        @x.setter
        def x(self, value: object) -> None:
            writes.append((self.label, value))  # type: ignore[attr-defined]
            if self.label == "b" and value == "orig":  # type: ignore[attr-defined]
                raise RuntimeError("b refuses its restore")
            self.__dict__["_x"] = value

    a, b, c = Logged("a"), Logged("b"), Logged("c")
    fixture = RedirectFixture()
    for target in (a, b, c):
        fixture.attr(target, "x", "patched")
    writes.clear()
    with pytest.raises(Exception, match="b refuses its restore"):
        fixture.undo()
    assert writes == [("c", "orig"), ("b", "orig"), ("a", "orig")]
    assert (a.x, c.x) == ("orig", "orig")


def test_module_and_class_variants_live_as_long_as_their_scope(tester: pytest.Pytester) -> None:
    """redirect_class lasts for its class, redirect_module for its module."""
    tester.makepyfile(
        test_a="""
        import helper

        class TestClass:
            def test_first(self, redirect_class):
                redirect_class.attr(helper, "other", "class")

            def test_second(self):
                assert helper.other == "class"

        def test_after_class():
            assert helper.other == "other"

        def test_module_first(redirect_module):
            redirect_module.attr(helper, "value", "module")

        def test_module_second():
            assert helper.value == "module"
        """,
        test_b="""
        import helper

        def test_next_module():
            assert helper.value == "orig"
        """,
    )
    tester.runpytest("--patchscope-leaks=error").assert_outcomes(passed=6)


def test_session_variant_lives_until_the_session_ends(tester: pytest.Pytester) -> None:
    """redirect_session lasts across modules and is undone when the session ends."""
    tester.makeconftest(
        """
        import pathlib
        import helper

        def pytest_sessionfinish(session):
            pathlib.Path("after.txt").write_text(helper.value)
        """
    )
    tester.makepyfile(
        test_a="""
        import helper

        def test_patch(redirect_session):
            redirect_session.attr(helper, "value", "session")
        """,
        test_b="""
        import helper

        def test_still_patched():
            assert helper.value == "session"
        """,
    )
    tester.runpytest("--patchscope-leaks=error").assert_outcomes(passed=2)
    assert (tester.path / "after.txt").read_text() == "orig"


# -- leak detection -----------------------------------------------------------

LEAKY = """
import helper
import patchscope

def test_leaks():
    patchscope.redirect_attr(helper, "value", "leaked").start()

def test_next():
    assert helper.value == "orig"
"""


def test_warn_is_the_default_and_names_the_entry_site(tester: pytest.Pytester) -> None:
    """By default a leaked activation is a LeakWarning naming file:line, and is left in place."""
    tester.makepyfile(test_leaky=LEAKY)
    result = tester.runpytest()
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*LeakWarning: test_leaky.py::test_leaks left patches behind:",
            "*activation <module 'helper'>.value -> 'leaked' (scope='process') "
            "entered at test_leaky.py:5",
        ]
    )


def test_error_fails_the_leaking_test_and_undoes_the_leak(tester: pytest.Pytester) -> None:
    """--patchscope-leaks=error errors the leaking test at teardown and stops the activation."""
    tester.makepyfile(test_leaky=LEAKY)
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaks*",
            "*entered at test_leaky.py:5",
            "*patchscope undid them*",
        ]
    )


def test_off_reports_nothing(tester: pytest.Pytester) -> None:
    """--patchscope-leaks=off neither reports nor undoes a leak."""
    tester.makepyfile(test_leaky=LEAKY)
    result = tester.runpytest("--patchscope-leaks=off")
    result.assert_outcomes(passed=1, failed=1)
    assert "left patches behind" not in result.stdout.str()


def test_ini_setting_and_option_precedence(tester: pytest.Pytester) -> None:
    """patchscope_leaks in the ini file sets the mode; the command-line option overrides it."""
    tester.makepyfile(test_leaky=LEAKY)
    _ini(tester, "patchscope_leaks = error")
    tester.runpytest().assert_outcomes(passed=2, errors=1)
    tester.runpytest("--patchscope-leaks=off").assert_outcomes(passed=1, failed=1)


def test_invalid_ini_mode_is_a_usage_error(tester: pytest.Pytester) -> None:
    """An unknown patchscope_leaks value stops the run with a usage error naming it."""
    _ini(tester, "patchscope_leaks = loud")
    tester.makepyfile("def test_nothing(): pass")
    result = tester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*patchscope_leaks = 'loud': expected one of off, warn, error*"])


def test_watch_catches_a_mock_patch_started_and_never_stopped(tester: pytest.Pytester) -> None:
    """patchscope_watch reports what mock.patch().start() changed and, under error, restores it."""
    _ini(tester, "patchscope_watch = helper")
    tester.makepyfile(
        test_mock="""
        from unittest import mock
        import helper

        def test_leaks():
            mock.patch.object(helper, "value", "mocked").start()
            mock.patch.object(helper, "new", 1, create=True).start()

        def test_next():
            assert helper.value == "orig"
            assert not hasattr(helper, "new")
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_mock.py::test_leaks left patches behind:",
            "*<module 'helper'>.value: 'orig' -> 'mocked'",
            "*<module 'helper'>.new: added 1",
        ]
    )


def test_watch_of_a_missing_path_is_a_usage_error(tester: pytest.Pytester) -> None:
    """A patchscope_watch entry that does not import stops the run with a usage error."""
    _ini(tester, "patchscope_watch = helper no_such_module")
    tester.makepyfile("def test_nothing(): pass")
    result = tester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*patchscope_watch: cannot import 'no_such_module'*"])


def test_wider_fixtures_own_their_patches_until_teardown(tester: pytest.Pytester) -> None:
    """A module-scoped fixture's redirects and watched changes are not leaks of the first test."""
    _ini(tester, "patchscope_watch = helper", "patchscope_leaks = error")
    tester.makepyfile(
        test_scoped="""
        from unittest import mock
        import pytest
        import helper
        import patchscope

        @pytest.fixture(scope="module")
        def patched():
            handle = patchscope.redirect_attr(helper, "value", "fixture").start()
            patcher = mock.patch.object(helper, "other", "mocked")
            patcher.start()
            yield
            patcher.stop()
            handle.stop()

        @pytest.fixture(scope="module")
        def through_plugin(redirect_module):
            redirect_module.attr(helper, "third", 3, create=True)

        def test_one(patched, through_plugin, redirect_module):
            redirect_module.attr(helper, "fourth", 4, create=True)
            assert (helper.value, helper.other) == ("fixture", "mocked")

        def test_two(patched, through_plugin):
            assert (helper.third, helper.fourth) == (3, 4)
        """,
        test_then="""
        import helper

        def test_clean():
            assert (helper.value, helper.other) == ("orig", "other")
            assert not hasattr(helper, "third") and not hasattr(helper, "fourth")
        """,
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=3)
    assert "left patches behind" not in result.stdout.str()


def test_a_wider_fixture_that_leaks_is_reported_at_its_teardown(tester: pytest.Pytester) -> None:
    """A module-scoped fixture's leftovers are blamed on it at its teardown, not on the test."""
    _ini(tester, "patchscope_leaks = error", "patchscope_watch = helper")
    tester.makepyfile(
        test_scoped="""
        from unittest import mock
        import pytest
        import helper
        import patchscope

        @pytest.fixture(scope="module")
        def leaky():
            patchscope.redirect_attr(helper, "value", "fixture").start()
            mock.patch.object(helper, "other", "mocked").start()

        def test_one(leaky):
            pass

        def test_two(leaky):
            pass
        """,
        test_then="""
        import helper

        def test_clean():
            assert (helper.value, helper.other) == ("orig", "other")
        """,
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_two*",
            "fixture 'leaky' (scope='module', defined at test_scoped.py:6) left patches "
            "behind at its teardown:",
            "  activation <module 'helper'>.value -> 'fixture' (scope='process') "
            "entered at test_scoped.py:8",
            "  <module 'helper'>.other: 'other' -> 'mocked'",
            "patchscope undid them (leaks=error).",
        ]
    )
    result.stdout.no_fnmatch_line("*test_two left patches behind*")


def test_a_fixture_leak_is_reported_during_a_test_marked_off(tester: pytest.Pytester) -> None:
    """leaks='off' exempts the test's own leaks, not those of a fixture torn down during it."""
    _ini(tester, "patchscope_leaks = error", "patchscope_watch = helper")
    tester.makepyfile(
        test_scoped="""
        from unittest import mock
        import pytest
        import helper
        import patchscope

        @pytest.fixture(scope="module")
        def leaky():
            patchscope.redirect_attr(helper, "value", "fixture").start()
            mock.patch.object(helper, "other", "mocked").start()

        def test_one(leaky):
            pass

        @pytest.mark.patchscope(leaks="off")
        def test_exempt(leaky):
            helper.own = "exempt"
        """,
        test_then="""
        import helper

        def test_clean():
            assert (helper.value, helper.other) == ("orig", "other")
            assert helper.own == "exempt"
        """,
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_exempt*",
            "fixture 'leaky' (scope='module', defined at test_scoped.py:6) left patches "
            "behind at its teardown:",
            "  activation <module 'helper'>.value -> 'fixture' (scope='process') "
            "entered at test_scoped.py:8",
            "  <module 'helper'>.other: 'other' -> 'mocked'",
            "patchscope undid them (leaks=error).",
        ]
    )
    result.stdout.no_fnmatch_line("*test_exempt left patches behind*")


@pytest.mark.parametrize(
    ("run", "marker", "erring", "state"),
    [
        pytest.param("error", "warn", "fixture 'leaky'", ("orig", "own"), id="error-run"),
        pytest.param(
            "warn", "error", "test_scoped.py::test_marked", ("fixture", "other"), id="warn-run"
        ),
    ],
)
def test_fixture_leaks_take_the_runs_mode_not_the_tests_marker(
    tester: pytest.Pytester, run: str, marker: str, erring: str, state: tuple[str, str]
) -> None:
    """During a marked test, its own leak follows the marker and a fixture's the run's mode."""
    _ini(tester, f"patchscope_leaks = {run}", "patchscope_watch = helper")
    tester.makepyfile(
        test_scoped=f"""
        import pytest
        import helper
        import patchscope

        @pytest.fixture(scope="module")
        def leaky():
            patchscope.redirect_attr(helper, "value", "fixture").start()

        def test_one(leaky):
            pass

        @pytest.mark.patchscope(leaks={marker!r})
        def test_marked(leaky):
            helper.other = "own"
        """,
        test_then=f"""
        import helper

        def test_state():
            assert (helper.value, helper.other) == {state!r}
        """,
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=3, errors=1, warnings=1)
    result.stdout.fnmatch_lines([f"ERROR test_scoped.py::test_marked - Failed: {erring}*"])


# -- a well-behaved plugin ----------------------------------------------------


def test_a_clean_suite_prints_nothing_from_the_plugin(tester: pytest.Pytester) -> None:
    """With nothing leaked, the output has no warnings and no mention of patchscope."""
    _ini(tester, "patchscope_watch = helper os")
    tester.makepyfile(
        """
        import helper

        def test_reads():
            assert helper.value == "orig"

        def test_uses_the_fixture(redirect):
            redirect.attr(helper, "value", 1)
        """
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=2)
    after_header = result.stdout.str().split("collected 2 items", 1)[1]
    assert "patchscope" not in after_header
    assert "warnings summary" not in after_header


def test_no_patchscope_disables_the_plugin(tester: pytest.Pytester) -> None:
    """-p no:patchscope removes the fixtures and the leak detection."""
    tester.makepyfile(test_leaky=LEAKY)
    tester.makepyfile(test_fixture="def test_fixture(redirect): pass")
    result = tester.runpytest("-p", "no:patchscope")
    result.assert_outcomes(passed=1, failed=1, errors=1)
    result.stdout.fnmatch_lines(["*fixture 'redirect' not found*"])
    assert "left patches behind" not in result.stdout.str()


def test_options_are_listed_in_help(pytester: pytest.Pytester) -> None:
    """pytest --help shows the option and both ini settings."""
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        ["*--patchscope-leaks=*", "*patchscope_leaks*", "*patchscope_watch*"]
    )


def test_leaked_context_activation_on_a_watched_module_is_reported_once(
    tester: pytest.Pytester,
) -> None:
    """A context-scope leak on a watched module is one line: not also its class swap."""
    _ini(tester, "patchscope_watch = helper")
    tester.makepyfile(
        test_ctx_leak="""
        import patchscope
        import helper

        def test_leak():
            patchscope.redirect_attr(helper, "value", "x", scope="context").start()
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*activation <module 'helper'>.value*test_ctx_leak.py:5*"])
    result.stdout.no_fnmatch_line("*__class__*")


# -- when watch paths are imported ---------------------------------------------


def test_a_project_module_next_to_the_tests_can_be_watched(pytester: pytest.Pytester) -> None:
    """A watch path that only collection puts on sys.path imports, with no pythonpath ini."""
    pytester.makepyfile(projmod="value = 'orig'\n")
    pytester.makeini("[pytest]\npatchscope_watch = projmod\npatchscope_leaks = error\n")
    pytester.makepyfile(
        test_proj="""
        import projmod

        def test_leaks():
            projmod.value = "leaked"

        def test_next():
            assert projmod.value == "orig"
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*<module 'projmod'>.value: 'orig' -> 'leaked'"])


def test_under_xdist_the_workers_import_the_watch_paths(pytester: pytest.Pytester) -> None:
    """With pytest-xdist, a project module that only collection makes importable is watched."""
    pytest.importorskip("xdist")
    pytester.makepyfile(projmod="value = 'orig'\n")
    pytester.makeini("[pytest]\npatchscope_watch = projmod\npatchscope_leaks = error\n")
    pytester.makepyfile(
        test_proj="""
        import projmod

        def test_leaks():
            projmod.value = "leaked"

        def test_next():
            assert projmod.value == "orig"
        """
    )
    result = pytester.runpytest("-n", "2")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*<module 'projmod'>.value: 'orig' -> 'leaked'"])


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["--fixtures"], ["--collect-only"]])
def test_runs_without_tests_never_import_watch_paths(
    tester: pytest.Pytester, args: list[str]
) -> None:
    """--help, --version, --fixtures and --collect-only succeed with an unimportable watch path."""
    _ini(tester, "patchscope_watch = no_such_module")
    tester.makepyfile("def test_nothing(): pass")
    assert tester.runpytest(*args).ret == pytest.ExitCode.OK


# -- what is not a leak --------------------------------------------------------


def test_copy_and_pickle_of_a_watched_class_is_not_a_leak(tester: pytest.Pytester) -> None:
    """copy, deepcopy and pickle caching __slotnames__ on a watched class is not reported."""
    tester.makepyfile(
        models="""
        class Model:
            def __init__(self):
                self.x = 1

        class Slotted:
            __slots__ = ("x",)
            def __getstate__(self):
                return None, {"x": self.x}
        """
    )
    _ini(tester, "patchscope_watch = models:Model models:Slotted", "patchscope_leaks = error")
    tester.makepyfile(
        test_copies="""
        import copy, pickle, typing
        import models

        def test_copies():
            slotted = models.Slotted()
            slotted.x = 2
            for obj in (models.Model(), slotted):
                copy.copy(obj)
                copy.deepcopy(obj)
                for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
                    pickle.dumps(obj, protocol)
            typing.get_type_hints(models.Model)
        """
    )
    tester.runpytest().assert_outcomes(passed=1)


def test_ignore_list_exempts_exact_attributes_and_globs(tester: pytest.Pytester) -> None:
    """patchscope_watch_ignore exempts the listed attributes (left as they are) and nothing else."""
    _ini(
        tester,
        "patchscope_watch = helper",
        "patchscope_watch_ignore = helper.value helper._cache*",
        "patchscope_leaks = error",
    )
    tester.makepyfile(
        test_ignored="""
        import helper

        def test_changes():
            helper.value = "changed"
            helper._cache_node = 1
            helper.other = "leaked"

        def test_next():
            assert (helper.value, helper._cache_node) == ("changed", 1)
            assert helper.other == "other"
        """
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_changes left patches behind:", "*.other: 'other' -> *"])
    result.stdout.no_fnmatch_line("*.value:*")
    result.stdout.no_fnmatch_line("*_cache_node*")


def test_an_object_watched_under_two_names_takes_ignore_entries_under_either(
    tester: pytest.Pytester,
) -> None:
    """Ignore entries may name an object watched twice by either of its watched names."""
    tester.makepyfile(alias="import helper\n")
    _ini(
        tester,
        "patchscope_watch = helper alias.helper",
        "patchscope_watch_ignore = alias.helper.value alias.helper._cache* helper.third",
        "patchscope_leaks = error",
    )
    tester.makepyfile(
        test_ignored="""
        import helper

        def test_changes():
            helper.value = "changed"
            helper._cache_node = 1
            helper.third = 3
            helper.other = "leaked"
        """
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_changes left patches behind:", "*.other: 'other' -> *"])
    result.stdout.no_fnmatch_line("*.value:*")
    result.stdout.no_fnmatch_line("*_cache_node*")
    result.stdout.no_fnmatch_line("*.third*")


def test_an_ignore_entry_outside_the_watched_objects_is_a_usage_error(
    tester: pytest.Pytester,
) -> None:
    """An exact ignore entry whose owner is not watched stops the run naming it and the fix."""
    _ini(tester, "patchscope_watch = helper", "patchscope_watch_ignore = time.tzname")
    tester.makepyfile("def test_nothing(): pass")
    result = tester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*patchscope_watch_ignore: 'time.tzname' is not an attribute of a watched object: "
         "add 'time' to patchscope_watch*"]
    )


def test_marker_sets_the_mode_of_one_test(tester: pytest.Pytester) -> None:
    """@pytest.mark.patchscope(leaks=...) overrides the run's mode for that test only."""
    tester.makepyfile(
        test_marked="""
        import pytest
        import helper
        import patchscope

        @pytest.mark.patchscope(leaks="off")
        def test_exempt():
            patchscope.redirect_attr(helper, "value", "exempt").start()

        def test_sees_the_exempt_leak():
            assert helper.value == "exempt"
            patchscope.active()[-1].stop()

        @pytest.mark.patchscope(leaks="error")
        def test_strict():
            patchscope.redirect_attr(helper, "value", "strict").start()

        def test_clean():
            assert helper.value == "orig"
        """
    )
    result = tester.runpytest("--patchscope-leaks=warn")
    result.assert_outcomes(passed=4, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_strict*"])
    result.stdout.no_fnmatch_line("*test_exempt left*")


def test_a_bad_marker_is_a_usage_error(tester: pytest.Pytester) -> None:
    """A patchscope marker without a valid leaks= stops the run naming the test."""
    tester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.patchscope(leaks="loud")
        def test_marked():
            pass
        """
    )
    result = tester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_bad.py::test_marked: @pytest.mark.patchscope(leaks='loud'): expected leaks=*"]
    )


# -- reporting -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["warn", "error"])
def test_a_watched_module_that_loses_its_name_is_reported(
    tester: pytest.Pytester, mode: str
) -> None:
    """Deleting a watched module's __name__ is reported as a leak, not a plugin crash."""
    _ini(tester, "patchscope_watch = helper")
    tester.makepyfile(
        test_name="""
        import helper

        def test_pops():
            del helper.__name__

        def test_next():
            assert helper.__name__ == "helper"
        """
    )
    result = tester.runpytest(f"--patchscope-leaks={mode}")
    if mode == "warn":
        result.assert_outcomes(passed=1, failed=1, warnings=1)
    else:
        result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*<module '?'>.__name__: removed (was 'helper')"])
    result.stdout.no_fnmatch_line("*pytest_plugin.py*")


def test_a_warning_turned_error_is_undone_like_error_mode(tester: pytest.Pytester) -> None:
    """Under warn, filterwarnings = error makes the leak an error at teardown, and undoes it."""
    _ini(tester, "filterwarnings = error")
    tester.makepyfile(test_leaky=LEAKY)
    result = tester.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*patchscope undid them (the warnings filter turned the LeakWarning into an error)."]
    )


def test_leak_warning_has_its_public_name() -> None:
    """LeakWarning names itself patchscope.testing.LeakWarning in tracebacks and filters."""
    from patchscope.testing import LeakWarning

    name = f"{LeakWarning.__module__}.{LeakWarning.__qualname__}"
    assert name == "patchscope.testing.LeakWarning"


# -- mock-style targets and scopes ----------------------------------------------


def test_attr_takes_one_dotted_string_in_every_scope(tester: pytest.Pytester) -> None:
    """redirect*.attr("pkg.mod.name", value) imports the module and patches that name."""
    tester.makepyfile(
        test_dotted="""
        import helper

        def test_function_scope(redirect):
            redirect.attr("helper.value", "dotted")
            assert helper.value == "dotted"

        def test_module_scope(redirect_module):
            redirect_module.attr("helper.other", "module")

        def test_still(redirect_package, redirect_session):
            redirect_package.attr("helper.value", "package")
            redirect_session.attr("helper.third", 3, create=True)
            assert (helper.value, helper.other, helper.third) == ("package", "module", 3)
        """
    )
    tester.runpytest("--patchscope-leaks=error").assert_outcomes(passed=3)


def test_redirect_package_has_pytests_package_scope_for_plugins(
    pytester: pytest.Pytester,
) -> None:
    """redirect_package lives as pytest scopes a plugin's package fixture: to the session's end."""
    pytester.makepyfile(helper=HELPER)
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.makeconftest(
        "import pathlib, helper\n\ndef pytest_sessionfinish(session):\n"
        "    pathlib.Path('after.txt').write_text(helper.value)\n"
    )
    pkg = pytester.mkpydir("pkg_a")
    (pkg / "test_one.py").write_text(
        "import helper\n\ndef test_patch(redirect_package):\n"
        "    redirect_package.attr(helper, 'value', 'pkg')\n"
    )
    (pkg / "test_two.py").write_text(
        "import helper\n\ndef test_still():\n    assert helper.value == 'pkg'\n"
    )
    pytester.runpytest("--patchscope-leaks=error").assert_outcomes(passed=2)
    assert (pytester.path / "after.txt").read_text() == "orig"


def test_attr_refuses_a_missing_value_or_an_undotted_path() -> None:
    """attr() without a value needs one dotted string; the errors say how to call it."""
    fixture = RedirectFixture()
    with pytest.raises(TypeError, match=r"no value to install: pass redirect\.attr\(target, name"):
        fixture.attr(patchscope, "active")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match=r"redirect\.attr\('os', value\): a single target must"):
        fixture.attr("os", 1)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        fixture.attr("os.no_such_name", 1)
    assert fixture.activations == ()


# -- what the interpreter, pytest and other plugins do -------------------------


def test_pytests_sys_last_exception_is_not_a_leak(tester: pytest.Pytester) -> None:
    """sys.last_type/value/traceback, which pytest sets when a call raises, are not reported."""
    _ini(tester, "patchscope_watch = sys helper", "xfail_strict = false")
    tester.makepyfile(
        test_raises="""
        import pytest

        def test_fails():
            raise ValueError("the test fails")

        @pytest.mark.xfail(raises=ValueError)
        def test_xfail_raises():
            raise ValueError("expected")

        @pytest.mark.xfail
        def test_xfail():
            raise ValueError("expected")
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(failed=1, xfailed=2)
    assert "left patches behind" not in result.stdout.str()


def test_a_leak_stays_a_failure_in_an_xfail_test(tester: pytest.Pytester) -> None:
    """A leak in a test marked xfail (raising or not) is an ERROR, not hidden as XFAIL."""
    _ini(tester, "patchscope_watch = helper", "xfail_strict = false")
    tester.makepyfile(
        test_xfail="""
        import pytest
        import helper

        @pytest.mark.xfail
        def test_leaks_and_fails():
            helper.value = "leaked"
            raise ValueError("expected")

        @pytest.mark.xfail
        def test_leaks_and_passes():
            helper.other = "leaked"
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(xfailed=1, xpassed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaks_and_fails*",
            "*ERROR at teardown of test_leaks_and_passes*",
        ]
    )


def test_a_modules_lazy_import_is_not_a_leak_and_stays(tester: pytest.Pytester) -> None:
    """A global set by the module's own lazy import or first-use cache stays, unreported."""
    tester.makepyfile(
        lazy="""
        cache = None

        def use():
            global json_mod, cache
            import json as json_mod
            cache = {}
            return cache
        """
    )
    _ini(tester, "patchscope_watch = lazy")
    tester.makepyfile(
        test_lazy="""
        import lazy

        def test_first():
            lazy.use()

        def test_second():
            assert lazy.cache == {}
            assert lazy.json_mod.__name__ == "json"
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=2)
    assert "left patches behind" not in result.stdout.str()


def test_the_same_change_again_is_reported_once_with_a_count(tester: pytest.Pytester) -> None:
    """A leak made again, identically, by later tests is counted once for the run, not reported."""
    tester.makepyfile(
        sentinel="""
        MARK = object()
        """
    )
    _ini(tester, "patchscope_watch = helper")
    tester.makepyfile(
        test_again="""
        import pytest
        import helper, sentinel

        @pytest.mark.parametrize("n", range(3))
        def test_same(n):
            helper.value = sentinel.MARK

        def test_undone():
            assert helper.value == "orig"

        def test_different():
            helper.value = object()
        """
    )
    # -rN: no short test summary, whose lines repeat the reports where the
    # terminal is wide enough.
    result = tester.runpytest("--patchscope-leaks=error", "-p", "no:randomly", "-rN")
    result.assert_outcomes(passed=5, errors=2)
    output = result.stdout.str()
    assert output.count("left patches behind") == 2
    result.stdout.fnmatch_lines(
        [
            "*patchscope: leaks seen again*",
            "<module 'helper'>.value: 'orig' -> <object object at *>: reported once, "
            "then made again by 2 more tests (not reported again)",
        ]
    )


def test_another_plugins_setup_hook_owns_what_it_switches_on(tester: pytest.Pytester) -> None:
    """What a tryfirst setup hook switches on and a later hook switches off is not a leak."""
    tester.makeconftest(
        """
        import pytest
        import helper

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_setup(item):
            helper.value = "resumed"

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_logreport(report):
            yield
            if report.when == "teardown":
                helper.value = "orig"
        """
    )
    _ini(tester, "patchscope_watch = helper")
    tester.makepyfile(
        test_hooked="""
        import helper

        def test_sees_it():
            assert helper.value == "resumed"

        def test_leaks():
            helper.other = "leaked"
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=2, errors=1)
    output = result.stdout.str()
    assert "'orig' -> 'resumed'" not in output
    result.stdout.fnmatch_lines(["*<module 'helper'>.other: 'other' -> 'leaked'"])


def test_no_patchscope_keeps_the_settings_for_strict_config(tester: pytest.Pytester) -> None:
    """-p no:patchscope with patchscope_* settings and markers passes --strict-config/markers."""
    _ini(tester, "patchscope_leaks = error", "patchscope_watch = helper")
    tester.makepyfile(
        test_marked="""
        import pytest
        import helper

        @pytest.mark.patchscope(leaks="off")
        def test_leaks():
            helper.value = "leaked"
        """
    )
    result = tester.runpytest("-p", "no:patchscope", "--strict-config", "--strict-markers")
    result.assert_outcomes(passed=1)
    assert "left patches behind" not in result.stdout.str()
    tester.runpytest("--strict-config", "--strict-markers").assert_outcomes(passed=1)


def test_a_watched_module_that_warns_at_import_does_not_stop_the_run(
    tester: pytest.Pytester,
) -> None:
    """Importing a watch path that warns under filterwarnings = error still runs the tests."""
    tester.makepyfile(
        warns="""
        import warnings
        warnings.warn("old module", DeprecationWarning)
        value = 1
        """
    )
    _ini(tester, "patchscope_watch = warns", "filterwarnings = error")
    tester.makepyfile(
        test_warns="""
        import sys

        def test_leaks():
            sys.modules["warns"].value = 2
        """
    )
    result = tester.runpytest("--patchscope-leaks=error")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*<module 'warns'>.value: 1 -> 2"])


def test_a_fixtures_repeated_leak_is_reported_once_and_still_undone(
    tester: pytest.Pytester,
) -> None:
    """A class-scoped fixture leaving one change in two classes: reported once, undone twice."""
    tester.makepyfile(sentinel="MARK = object()\n")
    _ini(tester, "patchscope_watch = helper")
    tester.makepyfile(
        test_classes="""
        import pytest
        import helper, sentinel

        @pytest.fixture(scope="class")
        def leaky():
            yield
            helper.value = sentinel.MARK

        @pytest.mark.usefixtures("leaky")
        class TestOne:
            def test_a(self):
                pass

        @pytest.mark.usefixtures("leaky")
        class TestTwo:
            def test_b(self):
                assert helper.value == "orig"

        def test_undone():
            assert helper.value == "orig"
        """
    )
    result = tester.runpytest("--patchscope-leaks=error", "-p", "no:randomly", "-rN")
    result.assert_outcomes(passed=3, errors=1)
    assert result.stdout.str().count("left patches behind at its teardown") == 1
    result.stdout.fnmatch_lines(["*then made again by 1 more test (not reported again)"])
