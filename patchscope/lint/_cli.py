"""``patchscope lint``: the command line, its output and its exit status."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ._config import ConfigError, load_config
from ._report import format_json, format_text
from ._rules import SUMMARIES
from ._run import lint_paths

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
            "Settings come from [tool.patchscope.lint] in pyproject.toml or\n"
            "[tool:patchscope.lint] in setup.cfg. Exit status: 0 clean,\n"
            "1 findings, 2 usage or configuration error."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        default=["."],
        help="files and directories to check (default: .)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: path:line:col: CODE message (default); json: one document",
    )
    parser.add_argument(
        "--statistics",
        action="store_true",
        help="after the findings, print how many there are of each code",
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
    """
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error or help
        return exc.code if isinstance(exc.code, int) else USAGE_ERROR
    try:
        result = lint_paths(args.paths, load_config(), jobs=args.jobs)
    except ConfigError as exc:
        print(f"patchscope lint: error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    except FileNotFoundError as exc:
        print(f"patchscope lint: error: no such file or directory: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if args.format == "json":
        sys.stdout.write(format_json(result))
    else:
        sys.stdout.write(format_text(result, with_statistics=args.statistics))
    return FINDINGS if result.findings else CLEAN
