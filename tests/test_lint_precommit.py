"""The pre-commit hook manifest at the repository root."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_hook_manifest_declares_the_lint() -> None:
    """``.pre-commit-hooks.yaml`` offers id patchscope-lint for Python files."""
    lines = [line.strip() for line in (ROOT / ".pre-commit-hooks.yaml").read_text().splitlines()]
    assert "- id: patchscope-lint" in lines
    for field in ("entry: patchscope lint", "language: python", "types: [python]"):
        assert field in lines


def test_hook_entry_is_an_installed_console_script() -> None:
    """The hook's ``entry`` command is the console script setup.cfg declares."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    scripts = setup["options.entry_points"]["console_scripts"].split("\n")
    assert "patchscope = patchscope.__main__:main" in [s.strip() for s in scripts]
