"""scripts/mutate.py, the mutation check, run on a tiny project of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("coverage")

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutate.py"
if not SCRIPT.exists():  # a wheel's test run copies tests/ without scripts/
    pytest.skip("scripts/mutate.py is not in this copy of the project", allow_module_level=True)

MODULE = '''\
"""A module to mutate."""

ZERO = 0


def sign(x):
    """Not mutated: a docstring."""
    if x < ZERO:
        return -1
    return 1


def double(x):
    seen = []
    seen.append(x)
    return x + x


def unused(x):
    return x == 2
'''

TESTS = """\
from mutatee.mod import double, sign


def test_sign():
    assert (sign(-3), sign(0), sign(5)) == (-1, 1, 1)


def test_double():
    assert double(2) == 4
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object], str]:
    root = tmp_path_factory.mktemp("project")
    (root / "mutatee").mkdir()
    (root / "mutatee" / "__init__.py").write_text("")
    (root / "mutatee" / "mod.py").write_text(MODULE)
    (root / "tests").mkdir()
    (root / "tests" / "test_mod.py").write_text(TESTS)
    out = root.parent / f"{root.name}-results.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--root",
            str(root),
            "--package",
            "mutatee",
            "--module",
            "mod.py",
            "--jobs",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root, json.loads(out.read_text()), proc.stdout


def _by_line(results: dict[str, object]) -> dict[int, list[dict[str, object]]]:
    found: dict[int, list[dict[str, object]]] = {}
    for m in results["mutants"]:  # type: ignore[attr-defined]
        found.setdefault(m["lineno"], []).append(m)
    return found


def test_mutants_the_tests_check_are_killed(run: tuple[Path, dict[str, object], str]) -> None:
    """Every mutant of code the tests check dies, module-level constants included."""
    lines = _by_line(run[1])
    checked = [m for line in (3, 8, 9, 10, 14, 16) for m in lines[line]]
    assert {m["description"] for m in lines[8]} == {"`<` -> `<=`"}
    assert len(checked) >= 10
    assert {m["status"] for m in checked} == {"killed"}, checked


def test_an_unchecked_statement_survives(run: tuple[Path, dict[str, object], str]) -> None:
    """A statement no test observes is reported as a survivor with its line."""
    (survivor,) = _by_line(run[1])[15]
    assert survivor["status"] == "survived"
    assert survivor["original"] == "seen.append(x)"
    assert "survived: mod.py:15: delete" in run[2]


def test_lines_no_test_runs_are_uncovered(run: tuple[Path, dict[str, object], str]) -> None:
    """Mutants of a function no test calls are survivors, marked as not run by any test."""
    uncovered = _by_line(run[1])[20]
    assert len(uncovered) == 3
    assert {m["status"] for m in uncovered} == {"uncovered"}


def test_docstrings_are_not_mutated(run: tuple[Path, dict[str, object], str]) -> None:
    """No mutant touches a docstring, and the score counts every mutant that ran."""
    results = run[1]
    assert not set(_by_line(results)) & {1, 7}
    assert results["scored"] == len(results["mutants"])  # type: ignore[arg-type]
    assert results["killed"] == results["scored"] - 4


def test_the_project_is_left_unchanged(run: tuple[Path, dict[str, object], str]) -> None:
    """Mutants are written into copies: the project's files are as they were."""
    root = run[0]
    assert (root / "mutatee" / "mod.py").read_text() == MODULE
    assert sorted(p.name for p in root.iterdir()) == ["mutatee", "tests"]


def test_list_prints_mutants_without_running(tmp_path: Path) -> None:
    """--list prints each mutant with its line before and after, and runs no test."""
    (tmp_path / "mutatee").mkdir()
    (tmp_path / "mutatee" / "mod.py").write_text(MODULE)
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--root",
            str(tmp_path),
            "--package",
            "mutatee",
            "--module",
            "mod.py",
            "--list",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    listed = "mod.py:8: compare: `<` -> `<=`\n    - if x < ZERO:\n    + if (x <= ZERO):"
    assert listed in proc.stdout
    assert "coverage run" not in proc.stdout


GATED = """\
import os


def gated(x):
    if os.environ.get("MUTATEE_OTHER"):
        return x + 1
    return x


def unused(x):
    return x == 2


def elsewhere(x):
    if os.environ.get("MUTATEE_OTHER"):
        return x * 3
    return x
"""

# What reaches elsewhere()'s gated line is in another file than the module's own.
LATE_TESTS = """\
import os

from mutatee.gated import elsewhere


def test_elsewhere():
    assert elsewhere(2) == (6 if os.environ.get("MUTATEE_OTHER") else 2)
"""

GATED_TESTS = """\
import os

from mutatee.gated import gated


def test_gated():
    assert gated(1) == (2 if os.environ.get("MUTATEE_OTHER") else 1)


def test_fails_on_the_other():
    assert not os.environ.get("MUTATEE_OTHER")
"""


def test_survivors_run_again_on_another_interpreter(tmp_path: Path) -> None:
    """--also runs what lived through the first interpreter on another one: code only that
    interpreter executes is killed there (and says where), by the tests of any file where
    no test ran its line on the first; code no test checks survives.
    Each interpreter first runs those tests unmutated in its server."""
    root = tmp_path / "project"
    (root / "mutatee").mkdir(parents=True)
    (root / "mutatee" / "__init__.py").write_text("")
    (root / "mutatee" / "gated.py").write_text(GATED)
    (root / "tests").mkdir()
    (root / "tests" / "test_gated.py").write_text(GATED_TESTS)
    (root / "tests" / "test_late.py").write_text(LATE_TESTS)
    other = tmp_path / "other-python"  # an interpreter on which the gated branch runs
    other.write_text(f'#!/bin/sh\nMUTATEE_OTHER=1 exec "{sys.executable}" "$@"\n')
    other.chmod(0o755)
    out = tmp_path / "results.json"
    command = [sys.executable, str(SCRIPT), "--root", str(root), "--package", "mutatee"]
    command += ["--module", "gated.py", "--jobs", "1", "--json", str(out)]
    proc = subprocess.run(
        [*command, "--also", str(other)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _by_line(json.loads(out.read_text()))
    version = ".".join(map(str, sys.version_info[:3]))
    assert len(lines[6]) >= 2
    assert {(m["status"], m["python"]) for m in lines[6]} == {("killed", version)}
    # Run there by the module's test file, which passes: a survivor, no longer uncovered.
    assert {(m["status"], m["python"]) for m in lines[11]} == {("survived", "")}
    # No test ran this line on the first: every test file runs it on the other.
    assert len(lines[16]) >= 2
    assert {(m["status"], m["python"]) for m in lines[16]} == {("killed", version)}
    assert f"{len(lines[6]) + len(lines[16])} of them only on {version}" in proc.stdout
    assert "3 tests run unmutated there, 1 failing (left out)" in proc.stdout


def test_rerun_runs_only_the_earlier_survivors(
    run: tuple[Path, dict[str, object], str], tmp_path: Path
) -> None:
    """--rerun takes an earlier run's results and runs its survivors alone, found by line."""
    root, results, _ = run
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(results))
    out = tmp_path / "again.json"
    command = [sys.executable, str(SCRIPT), "--root", str(root), "--package", "mutatee"]
    command += ["--module", "mod.py", "--jobs", "1", "--rerun", str(earlier), "--json", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = json.loads(out.read_text())["mutants"]
    survivors = [m for m in results["mutants"] if m["status"] in ("survived", "uncovered")]  # type: ignore[attr-defined]
    assert len(survivors) == 4
    key = ("lineno", "description", "status")
    assert sorted(tuple(m[k] for k in key) for m in again) == sorted(
        tuple(m[k] for k in key) for m in survivors
    )
    assert "--rerun: 4 of the 4 survivors" in proc.stdout


SHAPED = """\
class Base:
    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x


class Child(Base):
    __slots__ = ()

    def double(self):
        return self.x * 2
"""

SHAPED_TESTS = {
    "test_shaped.py": (
        "from mutatee.shaped import Base, Child\n\n\n"
        "def test_double():\n    assert Child(2).double() == 4\n"
    ),
    "test_footprint.py": (
        "from mutatee.shaped import Base, Child\n\n\n"
        "def test_no_dict():\n"
        "    assert Base.__dictoffset__ == 0 and Child.__dictoffset__ == 0\n"
    ),
}


def test_a_line_run_at_import_is_checked_by_the_tests_of_what_modules_define(
    tmp_path: Path,
) -> None:
    """A class-level statement runs only at import: its class's tests and the listed
    definition tests (tests/test_footprint.py) run against its mutants."""
    (tmp_path / "mutatee").mkdir()
    (tmp_path / "mutatee" / "__init__.py").write_text("")
    (tmp_path / "mutatee" / "shaped.py").write_text(SHAPED)
    (tmp_path / "tests").mkdir()
    for name, text in SHAPED_TESTS.items():
        (tmp_path / "tests" / name).write_text(text)
    out = tmp_path.parent / f"{tmp_path.name}-results.json"
    command = [sys.executable, str(SCRIPT), "--root", str(tmp_path), "--package", "mutatee"]
    command += ["--module", "shaped.py", "--jobs", "1", "--json", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (slots,) = _by_line(json.loads(out.read_text()))[9]
    assert (slots["original"], slots["status"]) == ("__slots__ = ()", "killed")
