"""Golden test: the lint over a fixture tree shaped like a real project.

``tests/lint_fixtures/project`` has what inference engines contain: an
allowed CUDA platform module, the hand-written ``torch.cuda.Event`` swap,
workers that query memory, aliased imports, a guarded ``import torch``, a
Python 2 leftover that does not parse, vendored code that is excluded, a
virtual environment that is skipped, and docstrings and comments that mention
``torch.cuda`` everywhere. ``project.expected.txt`` is the reviewed output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from patchscope.lint import main

FIXTURES = Path(__file__).parent / "lint_fixtures"


def test_fixture_project_output_is_exactly_the_reviewed_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Findings, their order, messages and statistics match the golden file."""
    monkeypatch.chdir(FIXTURES / "project")
    assert main(["--statistics", "--no-cache"]) == 1
    expected = (FIXTURES / "project.expected.txt").read_text()
    assert capsys.readouterr().out == expected


def test_fixture_project_is_linted_the_same_from_a_subdirectory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Settings are found above the working directory and globs stay rooted there."""
    monkeypatch.chdir(FIXTURES / "project" / "fakeserve")
    assert main(["--no-cache", "platforms"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        line.removeprefix("fakeserve/")
        for line in (FIXTURES / "project.expected.txt").read_text().splitlines()
        if line.startswith("fakeserve/platforms/")
    ]
