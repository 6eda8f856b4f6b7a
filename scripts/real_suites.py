"""Run real third-party test suites under the plugin and list every leak it reports.

Keeps leak detection honest: a false report shows up here first. Creates a
throwaway virtual environment, installs this checkout and pytest into it,
downloads each suite's source distribution (which ships its tests) from the
package index, installs the package and what its tests import, and runs the
tests with ``--patchscope-leaks=error`` and the package's own modules (and
the standard modules it patches) watched. Prints each suite's pytest summary
and every report, with how many tests reported it.

    python scripts/real_suites.py [--keep DIR] [--only NAME ...]

Needs the package index (pip) and a C compiler is optional (without one the
pure-Python build is installed). Takes a few minutes.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent


class Suite(NamedTuple):
    requirement: str
    #: what the tests need besides the package itself
    test_requirements: tuple[str, ...]
    #: patchscope_watch: the package's modules, and the standard ones it patches
    watch: str
    #: the test folders in the unpacked sdist
    tests: tuple[str, ...] = ("tests",)


SUITES = (
    Suite(
        "freezegun==1.5.5",
        ("python-dateutil>=2.7",),
        "freezegun freezegun.api time datetime uuid",
    ),
    Suite(
        "more-itertools==11.2.1",
        (),
        "more_itertools more_itertools.more more_itertools.recipes itertools",
    ),
    # Lazy imports inside functions (global parser; from dateutil import parser).
    Suite(
        "python-dateutil==4.0.0",
        # pytest-cov: the suite's conftest marks tests no_cover.
        ("hypothesis>=3.30", "freezegun", "attrs>=21.2.0", "pytest-cov"),
        "dateutil dateutil.parser dateutil.rrule dateutil.tz dateutil.tz.tz "
        "dateutil.relativedelta dateutil.easter time datetime",
    ),
    # Patches os, io, shutil, pathlib... for every test, with fixtures of
    # every scope (fs_module resumes its patches in its setup hook).
    Suite(
        "pyfakefs==6.3.2",
        (),
        "pyfakefs.fake_filesystem_unittest os os.path shutil io tempfile linecache sys "
        "pathlib glob builtins",
        ("pyfakefs/pytest_tests", "pyfakefs/tests"),
    ),
    # Patches sys.stdin/stdout, os.environ and termui's input functions.
    Suite(
        "click==8.5.1",
        (),
        "click click.core click.utils click.termui click._termui_impl click._compat "
        "click.testing sys os",
    ),
    # Installs sys.excepthook, patches functions and inspects tracebacks.
    Suite(
        "boltons==26.2.0",
        (),
        "boltons.tbutils boltons.funcutils boltons.debugutils boltons.iterutils "
        "boltons.strutils sys",
    ),
)

#: The first line of one report, test or fixture, in pytest's output.
_HEADER = re.compile(
    r"^(?P<who>\S+|fixture '.*?' \(.*?\)) left patches behind(?: at its teardown)?:$"
)


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True, timeout=900)


def _source(python: Path, requirement: str, into: Path) -> Path:
    """Download and unpack *requirement*'s sdist; return the unpacked folder."""
    subprocess.run(
        [str(python), "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         "-d", str(into), requirement],
        check=True,
        timeout=600,
    )
    (archive,) = into.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data") if sys.version_info >= (3, 12) else tar.extractall(into)
    archive.unlink()
    (folder,) = (p for p in into.iterdir() if p.is_dir())
    return folder


def _reports(output: str) -> dict[tuple[str, ...], list[str]]:
    """Each distinct report (its lines) and the tests or fixtures that made it."""
    reports: dict[tuple[str, ...], list[str]] = collections.defaultdict(list)
    who: str | None = None
    lines: list[str] = []
    for line in [*output.splitlines(), ""]:
        header = _HEADER.match(line)
        if who is not None and (header or not line.startswith("  ")):
            reports[tuple(lines)].append(who)
            who = None
        if header:
            who, lines = header["who"], []
        elif who is not None:
            lines.append(line.strip())
    return reports


def _seen_again(output: str) -> list[str]:
    """The lines of the plugin's "leaks seen again" summary section."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if "patchscope: leaks seen again" in line:
            rest = lines[index + 1 :]
            end = next((i for i, each in enumerate(rest) if each.startswith("=")), len(rest))
            return rest[:end]
    return []


def run_suite(python: Path, suite: Suite, work: Path) -> None:
    name = re.split(r"[=<>]", suite.requirement)[0]
    print(f"\n=== {suite.requirement}  (patchscope_watch = {suite.watch})", flush=True)
    shutil.rmtree(work / name, ignore_errors=True)  # from an earlier --keep run
    folder = _source(python, suite.requirement, work / name)
    _pip(python, str(folder), *suite.test_requirements)
    # Run from the sdist's folder, against the installed package; -o sets the
    # plugin's ini keys whatever the suite's own configuration says.
    done = subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rN",
         "--patchscope-leaks=error", "-o", f"patchscope_watch={suite.watch}", *suite.tests],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    last = summary[-1].strip("= ") if summary else "(no summary)"
    print(f"pytest exit {done.returncode}: {last}")
    if done.returncode not in (0, 1):
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    reports = _reports(done.stdout)
    print(f"reports: {sum(map(len, reports.values()))}, {len(reports)} distinct")
    again = _seen_again(done.stdout)
    if again:
        print("seen again after their report (counted, not reported again):")
        print("\n".join(f"      {line}" for line in again))
    for lines, who in sorted(reports.items(), key=lambda report: -len(report[1])):
        shown = ", ".join(who[:3]) + (f" and {len(who) - 3} more" if len(who) > 3 else "")
        print(f"\n  {len(who)}x by {shown}:")
        print("\n".join(f"      {line}" for line in lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="build the environment here and keep it")
    parser.add_argument(
        "--only", action="append", metavar="NAME", help="run only this suite (repeatable)"
    )
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="patchscope-suites-"))
    try:
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        python = venv / "bin" / "python"
        _pip(python, "-c", str(ROOT / "constraints.txt"), str(ROOT), "pytest")
        for suite in SUITES:
            if args.only and re.split(r"[=<>]", suite.requirement)[0] not in args.only:
                continue
            run_suite(python, suite, work)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
