"""Time ``patchscope lint`` against ``ast.parse``, a regex scan and ruff's banned-api.

Usage: ``python benchmarks/bench_lint.py [DIRECTORY] [--repeat N] [--jobs N] [--tree N]``.
DIRECTORY defaults to the installed torch package (found without importing
it). The best of ``--repeat`` runs of each is kept, the runs interleaved.

In process: the lint, a bare ``ast.parse`` and a regex scan read the same
files through the same process pool and chunking
(``patchscope.lint._parallel.run_chunked``), file discovery included.
Targets: lint <= 1.5x ``ast.parse``.

End to end, each a fresh command as a user or pre-commit runs it: ``patchscope
lint`` cold (an empty cache, which it fills), warm (the same tree again,
every file unchanged), and ``ruff check`` with only TID251 (banned-api)
configured for the lint's exact default APIs, without its cache (ruff's cold
run). Targets: cold <= 3x ruff on DIRECTORY; warm <= ruff on DIRECTORY and on
a tree of its first ``--tree`` files (200 by default, copied to a scratch
directory), where start-up time dominates.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

from patchscope.lint import LintConfig, lint_paths
from patchscope.lint._files import FileSelector
from patchscope.lint._parallel import default_jobs, run_chunked
from patchscope.lint._rules import CUDA, RULES

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


def _ruff_config(directory: str) -> str:
    """A ruff.toml banning the lint's exact default APIs (ruff takes no globs)."""
    lines = ["[lint]", 'select = ["TID251"]', "", "[lint.flake8-tidy-imports.banned-api]"]
    for rule in RULES:
        for api, use in rule.apis.items():
            if not any(ch in api for ch in "*?["):
                lines.append(f'"{CUDA}.{api}".msg = "use {use}"')
    path = os.path.join(directory, "ruff.toml")
    with open(path, "w", encoding="utf-8") as stream:
        stream.write("\n".join(lines) + "\n")
    return path


def _command(args: list[str]) -> int:
    """Run a command, discard its output, return how many lines it printed."""
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")
    return len(done.stdout.splitlines())


def _seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _small_tree(directory: str, paths: list[str], count: int, scratch: str) -> str:
    """A copy of the first ``count`` files of ``paths`` under ``scratch``."""
    tree = os.path.join(scratch, "tree")
    for path in paths[:count]:
        target = os.path.join(tree, os.path.relpath(path, directory))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(path, target)
    return tree


def _end_to_end(
    directory: str, jobs: int, repeat: int, scratch: str
) -> tuple[dict[str, float], dict[str, int]]:
    """Best-of-``repeat`` seconds of cold, warm and ruff on ``directory``, and line counts."""
    work = tempfile.mkdtemp(dir=scratch)
    settings = os.path.join(work, "pyproject.toml")
    with open(settings, "w", encoding="utf-8") as stream:
        stream.write("[tool.patchscope.lint]\n")  # the defaults; the cache goes here
    ruff = shutil.which("ruff") or os.path.join(os.path.dirname(sys.executable), "ruff")
    lint_cmd = [sys.executable, "-m", "patchscope", "lint", "--config", settings, "-j"]
    lint_cmd += [str(jobs), directory]
    ruff_cmd = [ruff, "check", "--no-cache", "--quiet", "--config", _ruff_config(work)]
    ruff_cmd += ["--output-format", "concise", directory]
    counts: dict[str, int] = {}

    def cold() -> None:
        shutil.rmtree(os.path.join(work, ".patchscope_cache"), ignore_errors=True)
        counts["cold"] = _command(lint_cmd)

    def warm() -> None:
        counts["warm"] = _command(lint_cmd)

    def banned_api() -> None:
        counts["ruff"] = _command(ruff_cmd)

    # Interleaved so drift in machine load hits all of them alike.
    runs = [("cold", cold), ("warm", warm), ("ruff", banned_api)]
    timings: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _ in range(repeat):
        for name, run in runs:
            timings[name].append(_seconds(run))
    return {name: min(values) for name, values in timings.items()}, counts


def main() -> int:
    """Run the measurements and print wall times and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--tree", type=int, default=200, help="files in the small tree")
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

    rules = config.rules()
    wanted = []
    for path in paths:
        with open(path, "rb") as stream:
            if rules.wanted(stream.read()):
                wanted.append(path)
    wanted_bytes = sum(os.stat(path).st_size for path in wanted)

    # In process, interleaved so drift in machine load hits all runs alike.
    runs: list[tuple[str, Callable[[], None]]] = [("lint", lint), ("parse", parse), ("regex", scan)]
    timings: dict[str, list[float]] = {name: [] for name, _ in runs}
    for _ in range(args.repeat):
        for name, run in runs:
            timings[name].append(_seconds(run))
    best = {name: min(values) for name, values in timings.items()}
    scratch = tempfile.mkdtemp(prefix="bench_lint_")
    try:
        big, counts = _end_to_end(directory, args.jobs, args.repeat, scratch)
        tree = _small_tree(directory, paths, args.tree, scratch)
        small, _ = _end_to_end(tree, args.jobs, args.repeat, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"directory   {directory}")
    print(
        f"files       {len(paths)} ({sum(sizes) / 1e6:.1f} MB), jobs {args.jobs}, "
        f"best of {args.repeat}, Python {sys.version.split()[0]}"
    )
    print(f"findings    {len(result.findings)} (lint), {counts['ruff']} lines (ruff TID251)")
    print(
        f"prefilter   {len(wanted)} of {len(paths)} files ({wanted_bytes / 1e6:.1f} MB) "
        f"hold one of {b', '.join(rules.needles).decode()} and are parsed"
    )
    print("in process:")
    print(f"  lint        {best['lint']:.3f} s")
    print(f"  ast.parse   {best['parse']:.3f} s")
    print(f"  regex scan  {best['regex']:.3f} s")
    print(f"  lint / ast.parse   {best['lint'] / best['parse']:.2f}x  (target <= 1.5x)")
    print(f"  lint / regex scan  {best['lint'] / best['regex']:.2f}x")
    print(f"  ast.parse / regex  {best['parse'] / best['regex']:.2f}x  (floor for any AST lint)")
    for label, times, target in (
        (f"end to end on {directory} (fresh commands):", big, 3.0),
        (f"end to end on its first {args.tree} files:", small, None),
    ):
        print(label)
        print(f"  patchscope lint, cold cache  {times['cold']:.3f} s")
        print(f"  patchscope lint, warm cache  {times['warm']:.3f} s")
        print(f"  ruff check TID251, no cache  {times['ruff']:.3f} s")
        print(f"  warm / ruff   {times['warm'] / times['ruff']:.2f}x  (target <= 1.0x)")
        cold = f"  cold / ruff   {times['cold'] / times['ruff']:.2f}x"
        print(cold + (f"  (target <= {target:.1f}x)" if target else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
