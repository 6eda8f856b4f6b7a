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
    """A module-scoped fixture that never stops its redirect is named when it is torn down."""
    _ini(tester, "patchscope_leaks = error")
    tester.makepyfile(
        test_scoped="""
        import pytest
        import helper
        import patchscope

        @pytest.fixture(scope="module")
        def leaky():
            patchscope.redirect_attr(helper, "value", "fixture").start()

        def test_one(leaky):
            pass

        def test_two(leaky):
            pass
        """,
    )
    result = tester.runpytest()
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_two*",
            "*entered at test_scoped.py:7, by fixture 'leaky'",
        ]
    )


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
