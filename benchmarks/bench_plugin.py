"""Overhead of the pytest plugin on a suite of 1,000 trivial tests.

Generates the suite in a temporary directory and runs it, several times and
interleaved, with the plugin (leak detection on, two watched modules set in
the ini file) and with ``-p no:patchscope``. Prints the median wall-clock and
CPU times (user + system of the pytest process, which other load on the
machine disturbs less) and their ratios; the target is at most 1.15.

    python benchmarks/bench_plugin.py [--repeat N]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = 10
TESTS_PER_FILE = 100
WATCHED = "os json"


def _write_suite(root: Path) -> None:
    for f in range(FILES):
        body = "\n".join(f"def test_{t}():\n    assert {t} == {t}\n" for t in range(TESTS_PER_FILE))
        (root / f"test_trivial_{f}.py").write_text(body)
    # Two configurations side by side, so the plain run does not warn about
    # ini keys it does not know.
    (root / "with_plugin.ini").write_text(
        f"[pytest]\npatchscope_leaks = warn\npatchscope_watch = {WATCHED}\n"
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
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _write_suite(root)
        configurations = {
            "plugin (leaks=warn, 2 watched)": ["-c", "with_plugin.ini"],
            "-p no:patchscope": ["-c", "plain.ini", "-p", "no:patchscope"],
        }
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in configurations}
        _run(root, configurations["-p no:patchscope"])  # warm the file-system caches
        for _ in range(repeat):
            for name, args in configurations.items():
                times[name].append(_run(root, args))
    tests = FILES * TESTS_PER_FILE
    print(f"{tests} trivial tests, {repeat} runs each, interleaved")
    medians = {}
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        medians[name] = (wall, cpu)
        print(f"{name:32} median wall {wall:.3f} s  median CPU {cpu:.3f} s")
    (plugin_wall, plugin_cpu), (plain_wall, plain_cpu) = medians.values()
    print(f"overhead ratio, wall: {plugin_wall / plain_wall:.3f}  (target <= 1.15)")
    print(f"overhead ratio, CPU:  {plugin_cpu / plain_cpu:.3f}  (target <= 1.15)")


if __name__ == "__main__":
    main()
