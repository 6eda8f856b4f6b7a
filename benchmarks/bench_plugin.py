"""Overhead of the pytest plugin on a suite of 1,000 trivial tests.

Generates the suite in a temporary directory and runs it, several times and
interleaved, with ``-p no:patchscope`` and with the plugin (leak detection on)
watching two modules and fifteen modules (about 1,800 names) from the ini
file. Prints the median wall-clock and CPU times (user + system of the pytest
process, which other load on the machine disturbs less) and each
configuration's ratios to the plain run, all measured in the same run; the
target is at most 1.10.

    python benchmarks/bench_plugin.py [--repeat N]
"""

from __future__ import annotations

import argparse
import importlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = 10
TESTS_PER_FILE = 100
TARGET = 1.10
WATCHED = {
    "2 watched": "os json",
    "15 watched": "os socket typing inspect collections re functools json math threading "
    "logging subprocess pathlib argparse decimal",
}
PLAIN = "-p no:patchscope"


def _write_suite(root: Path) -> None:
    for f in range(FILES):
        body = "\n".join(f"def test_{t}():\n    assert {t} == {t}\n" for t in range(TESTS_PER_FILE))
        (root / f"test_trivial_{f}.py").write_text(body)
    # One configuration file each, so the plain run does not warn about ini
    # keys it does not know.
    for label, modules in WATCHED.items():
        (root / f"{label.split()[0]}.ini").write_text(
            f"[pytest]\npatchscope_leaks = warn\npatchscope_watch = {modules}\n"
        )
    (root / "plain.ini").write_text("[pytest]\n")


def _run(root: Path, args: list[str]) -> tuple[float, float]:
    """Run pytest once; return (wall seconds, CPU seconds of the child)."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if done.returncode != 0 or f"{FILES * TESTS_PER_FILE} passed" not in done.stdout:
        raise SystemExit(f"run failed: {' '.join(command)}\n{done.stdout}\n{done.stderr}")
    if "warning" in done.stdout:
        raise SystemExit(f"unexpected warnings:\n{done.stdout}")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per configuration")
    repeat = parser.parse_args().repeat
    names = {
        label: sum(len(vars(importlib.import_module(m))) for m in modules.split())
        for label, modules in WATCHED.items()
    }
    configurations = {PLAIN: ["-c", "plain.ini", "-p", "no:patchscope"]}
    for label in WATCHED:
        configurations[f"plugin, {label} ({names[label]} names)"] = [
            "-c",
            f"{label.split()[0]}.ini",
        ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_suite(root)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in configurations}
        _run(root, configurations[PLAIN])  # warm the file-system caches
        for _ in range(repeat):
            for name, args in configurations.items():
                times[name].append(_run(root, args))
    tests = FILES * TESTS_PER_FILE
    print(f"{tests} trivial tests, {repeat} runs each, interleaved, leaks=warn")
    medians = {
        name: (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        for name, runs in times.items()
    }
    width = max(map(len, medians))
    for name, (wall, cpu) in medians.items():
        print(f"{name:{width}}  median wall {wall:.3f} s  median CPU {cpu:.3f} s")
    plain_wall, plain_cpu = medians[PLAIN]
    for name, (wall, cpu) in medians.items():
        if name != PLAIN:
            print(
                f"{name:{width}}  ratio wall {wall / plain_wall:.3f}  CPU {cpu / plain_cpu:.3f}"
                f"  (target <= {TARGET:.2f})"
            )


if __name__ == "__main__":
    main()
