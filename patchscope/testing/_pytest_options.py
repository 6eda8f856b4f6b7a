"""The pytest plugin's command-line option, ini settings and marker, on their own.

Registered as a second ``pytest11`` entry point, ``patchscope_options``. It
does nothing while the ``patchscope`` plugin is loaded (that plugin registers
them itself); after ``-p no:patchscope`` it registers them, so a project
whose configuration sets ``patchscope_*`` options or marks tests with
``@pytest.mark.patchscope`` still runs under ``--strict-config`` and
``--strict-markers``, with leak detection off. pytest calls these hooks from
one thread.
"""

from __future__ import annotations

import pytest

MODES = ("off", "warn", "error")
MARKER = (
    "patchscope(leaks): leak detection for this test: 'off', 'warn' or 'error' "
    "(overrides patchscope_leaks, unless that is off for the whole run)"
)


def add_options(parser: pytest.Parser) -> None:
    """Add ``--patchscope-leaks`` and the ``patchscope_*`` ini settings to *parser*."""
    group = parser.getgroup("patchscope", "patchscope leak detection")
    group.addoption(
        "--patchscope-leaks",
        choices=MODES,
        default=None,
        dest="patchscope_leaks",
        help="what to do when a test leaves a patch behind: off, warn, or error "
        "(error the test at teardown, then undo the leak). Overrides the "
        "patchscope_leaks ini setting; default: warn.",
    )
    parser.addini(
        "patchscope_leaks",
        "patchscope leak detection: off, warn (default) or error",
        default="warn",
    )
    parser.addini(
        "patchscope_watch",
        "dotted paths of modules or classes (pkg.mod, pkg.mod:Class) to snapshot "
        "before each test and compare after it (catches leaks from any patching tool)",
        type="args",
        default=[],
    )
    parser.addini(
        "patchscope_watch_ignore",
        "attributes of watched objects whose changes are not leaks: dotted paths "
        "(time.tzname, pkg.mod.Class.cache) or globs (uuid._*)",
        type="args",
        default=[],
    )


def _blocked(pluginmanager: pytest.PytestPluginManager) -> bool:
    return pluginmanager.is_blocked("patchscope")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the settings when ``-p no:patchscope`` turned the plugin off."""
    if _blocked(pluginmanager):
        add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker when ``-p no:patchscope`` turned the plugin off."""
    if _blocked(config.pluginmanager):
        config.addinivalue_line("markers", MARKER)
