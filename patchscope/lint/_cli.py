"""``patchscope lint``: the command line, its output and its exit status."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from ._config import ConfigError, read_config
from ._report import format_github, format_json, format_text
from ._rules import SUMMARIES
from ._run import LintResult, lint_paths, lint_source

#: Exit statuses, as flake8 and ruff use them.
CLEAN, FINDINGS, USAGE_ERROR = 0, 1, 2


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    codes = "\n".join(f"  {code}  {summary}" for code, summary in SUMMARIES.items())
    parser = argparse.ArgumentParser(
        prog="patchscope lint",
        description="Report hard-coded torch.cuda APIs, through any import alias.",
        epilog=(
            f"codes:\n{codes}\n\n"
            "Each file's settings come from the nearest pyproject.toml with\n"
            "[tool.patchscope.lint] or setup.cfg with [tool:patchscope.lint]\n"
            "above it (or --config). Exit status: 0 clean, 1 findings,\n"
            "2 usage or configuration error."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        default=["."],
        help="files and directories to check (default: .); - reads the source from stdin",
    )
    parser.add_argument(
        "--output-format",
        "--format",
        dest="format",
        choices=("text", "json", "github"),
        default="text",
        help=(
            "text: path:line:col: CODE message (default); json: one document; "
            "github: GitHub Actions annotations"
        ),
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a pyproject.toml or setup.cfg to use for every file, instead of each file's nearest",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write .patchscope_cache/ (parse every file)",
    )
    parser.add_argument(
        "--report-unused-suppressions",
        action="store_true",
        help="report suppression comments that silence nothing (PS008)",
    )
    parser.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="with -, the file name stdin stands for: its settings apply, findings name it",
    )
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="after the findings, print how many there are of each code",
    )
    fixes = parser.add_mutually_exclusive_group()
    fixes.add_argument(
        "--fix",
        action="store_true",
        help=(
            "rewrite the findings whose replacement means the same on every device "
            "(see the fix table in the docs), then report what is left"
        ),
    )
    fixes.add_argument(
        "--diff",
        action="store_true",
        help="print what --fix would change as a unified diff, change nothing (exit 1 if any)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=_positive,
        default=None,
        metavar="N",
        help="worker processes (default: one per usable core)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``patchscope lint`` with ``argv`` (default: ``sys.argv[1:]``).

    Returns the exit status: 0 when clean, 1 when anything was reported, 2
    for a usage or configuration error (the reason goes to stderr).

    Thread safety: it writes to ``sys.stdout`` and ``sys.stderr``; run one at
    a time per process (``lint_paths`` is the API for concurrent runs).
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error or help
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    if "-" in args.paths and len(args.paths) > 1:
        return _usage_error("'-' (stdin) cannot be combined with other paths")
    if args.stdin_filename is not None and args.paths not in (["-"], ["."]):
        return _usage_error("--stdin-filename goes with '-' (stdin), not with paths to read")
    if (args.fix or args.diff) and ("-" in args.paths or args.stdin_filename is not None):
        return _usage_error("--fix and --diff rewrite files; they do not read stdin ('-')")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", RuntimeWarning)
            result = _run(args)
    except ConfigError as exc:
        return _usage_error(str(exc))
    except FileNotFoundError as exc:
        return _usage_error(f"no such file or directory: {exc}")
    for warning in caught:
        print(f"patchscope lint: warning: {warning.message}", file=sys.stderr)
    if args.diff:
        diffs = _fixed(result, write=False)
        sys.stdout.write("".join(diffs))
        return FINDINGS if diffs else CLEAN
    if args.fix and _fixed(result, write=True):
        result = _run(args)  # report what is left, at its new positions
    if args.format == "json":
        sys.stdout.write(format_json(result))
    elif args.format == "github":
        sys.stdout.write(format_github(result))
    else:
        sys.stdout.write(format_text(result, with_statistics=args.statistics))
    return FINDINGS if result.findings else CLEAN


def _run(args: argparse.Namespace) -> LintResult:
    config = read_config(args.config) if args.config is not None else None
    stdin = args.paths == ["-"] or (args.stdin_filename is not None and args.paths == ["."])
    if stdin:
        data = sys.stdin.buffer.read()
        return lint_source(
            data,
            args.stdin_filename or "-",
            config,
            report_unused_suppressions=args.report_unused_suppressions,
        )
    return lint_paths(
        args.paths,
        config,
        jobs=args.jobs,
        cache=not args.no_cache,
        report_unused_suppressions=args.report_unused_suppressions,
    )


def _fixed(result: LintResult, *, write: bool) -> list[str]:
    """Apply (``write``) or diff the safe fixes; one diff per changed file."""
    from ._fix import by_path, fix_source, unified_diff

    diffs = []
    count = 0
    for path, found in by_path(result.findings).items():
        try:
            with open(path, "rb") as stream:
                before = stream.read()
        except OSError:
            continue
        after, fixed = fix_source(before, found)
        if not fixed:
            continue
        count += fixed
        diffs.append(unified_diff(path, before, after))
        if write:
            with open(path, "wb") as stream:
                stream.write(after)
    if write and count:
        print(
            f"patchscope lint: fixed {count} finding{'s' * (count != 1)} "
            f"in {len(diffs)} file{'s' * (len(diffs) != 1)}",
            file=sys.stderr,
        )
    return diffs


def _usage_error(message: str) -> int:
    print(f"patchscope lint: error: {message}", file=sys.stderr)
    return USAGE_ERROR
