"""Time ``patchscope lint`` against a bare ``ast.parse`` and a regex scan.

Usage: ``python benchmarks/bench_lint.py [DIRECTORY] [--repeat N] [--jobs N]``.
DIRECTORY defaults to the installed torch package (found without importing
it). All three runs read the same files through the same process pool and
chunking (``patchscope.lint._parallel.run_chunked``); each is timed end to end,
file discovery included, and the best of ``--repeat`` runs is kept. The issue's
targets: linter <= 1.5x the ``ast.parse`` baseline and <= 3x the regex scan.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import sys
import time
import warnings
from collections.abc import Callable

from patchscope.lint import LintConfig, lint_paths
from patchscope.lint._files import FileSelector
from patchscope.lint._parallel import default_jobs, run_chunked

# What the regex pre-commit scripts this lint replaces typically look for.
_PATTERN = re.compile(
    r"torch\.cuda\.(Event|Stream|current_stream|stream|synchronize|empty_cache"
    r"|memory_\w+|max_memory_\w+|mem_get_info|reset_peak_memory_stats"
    r"|set_device|device|current_device|device_count|manual_seed|manual_seed_all)\b"
)


def _parse_chunk(paths: list[str]) -> list[int]:
    """The floor: read and ``ast.parse`` every file, as the linter must."""
    sizes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in paths:
            with open(path, "rb") as stream:
                data = stream.read()
            try:
                ast.parse(data, filename=path)
            except (SyntaxError, ValueError):
                pass
            sizes.append(len(data))
    return sizes


def _regex_chunk(paths: list[str]) -> list[int]:
    """A regex pre-commit script: every match of a typical pattern, per file."""
    counts = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as stream:
            text = stream.read()
        counts.append(sum(1 for _ in _PATTERN.finditer(text)))
    return counts


def _seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> int:
    """Run the three measurements and print wall times and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    args = parser.parse_args()
    directory = args.directory
    if directory is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            parser.error("torch is not installed; pass a DIRECTORY")
        directory = next(iter(spec.submodule_search_locations))
    config = LintConfig(root=directory)

    def files() -> tuple[list[str], list[int]]:
        found = FileSelector(config).collect([directory])
        return found, [os.stat(path).st_size for path in found]

    def lint() -> None:
        lint_paths([directory], config, jobs=args.jobs)

    def parse() -> None:
        run_chunked(_parse_chunk, *files(), jobs=args.jobs)

    def scan() -> None:
        run_chunked(_regex_chunk, *files(), jobs=args.jobs)

    paths, sizes = files()
    _regex_chunk(paths)  # warm the page cache so no run pays for the disk
    result = lint_paths([directory], config, jobs=args.jobs)
    # Interleave the runs so drift in machine load hits all three alike.
    timings: dict[str, list[float]] = {"lint": [], "parse": [], "regex": []}
    for _ in range(args.repeat):
        for name, run in (("lint", lint), ("parse", parse), ("regex", scan)):
            timings[name].append(_seconds(run))
    best = {name: min(values) for name, values in timings.items()}

    print(f"directory   {directory}")
    print(
        f"files       {len(paths)} ({sum(sizes) / 1e6:.1f} MB), jobs {args.jobs}, "
        f"best of {args.repeat}, Python {sys.version.split()[0]}"
    )
    print(f"findings    {len(result.findings)}")
    print(f"lint        {best['lint']:.3f} s")
    print(f"ast.parse   {best['parse']:.3f} s")
    print(f"regex scan  {best['regex']:.3f} s")
    print(f"lint / ast.parse   {best['lint'] / best['parse']:.2f}x  (target <= 1.5x)")
    print(f"lint / regex scan  {best['lint'] / best['regex']:.2f}x  (target <= 3x)")
    print(f"ast.parse / regex  {best['parse'] / best['regex']:.2f}x  (floor for any AST lint)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
