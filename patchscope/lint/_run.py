"""One lint run: collect the files, check them in parallel, gather findings."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ._checker import Finding, check_file
from ._config import LintConfig, load_config
from ._files import FileSelector
from ._parallel import run_chunked
from ._rules import RuleSet


@dataclass(frozen=True)
class LintResult:
    """What a run found: sorted findings and how many files were read."""

    findings: tuple[Finding, ...]
    files_checked: int


def lint_paths(
    paths: Sequence[str],
    config: LintConfig | None = None,
    *,
    jobs: int | None = None,
) -> LintResult:
    """Lint the files under ``paths`` (files and directories).

    ``config`` defaults to :func:`load_config` for the current directory;
    ``jobs`` to the number of usable cores. Raises :class:`FileNotFoundError`
    for a path that does not exist and :class:`ConfigError` for bad settings.
    Files that do not parse are findings (``PS000``), not errors. Starts its
    own worker processes; concurrent calls do not interfere.
    """
    config = load_config() if config is None else config
    selector = FileSelector(config)
    files = selector.collect(paths)
    rules = config.rules()
    items = [(path, selector.allowed(path)) for path in files]
    weights = [_size(path) for path in files]
    per_file = run_chunked(functools.partial(_check_chunk, rules), items, weights, jobs)
    codes = config.codes
    findings = sorted(f for found in per_file for f in found if f.code in codes)
    return LintResult(tuple(findings), len(files))


# Allowed files are still parsed, so a syntax error there is reported, but
# nothing in them is matched against the rules.
_PARSE_ONLY = RuleSet(())


def _check_chunk(rules: RuleSet, items: list[tuple[str, bool]]) -> list[list[Finding]]:
    return [check_file(path, _PARSE_ONLY if allowed else rules) for path, allowed in items]


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # reported as PS000 when the worker cannot read it
