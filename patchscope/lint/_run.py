"""One lint run: collect the files, check the changed ones in parallel, gather findings."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ._cache import Cache, digest
from ._checker import check_file, check_source
from ._config import LintConfig
from ._files import FileSelector
from ._finding import Finding
from ._parallel import run_chunked
from ._rules import PARSE_ERROR, UNUSED_SUPPRESSION, RuleSet


@dataclass(frozen=True)
class LintResult:
    """What a run found: sorted findings and how many files were read.

    Immutable; safe to share between threads.
    """

    findings: tuple[Finding, ...]
    files_checked: int


def lint_paths(
    paths: Sequence[str],
    config: LintConfig | None = None,
    *,
    jobs: int | None = None,
    cache: bool = False,
    report_unused_suppressions: bool = False,
) -> LintResult:
    """Lint the files under ``paths`` (files and directories).

    Each file follows ``config`` when it is given, else the nearest
    configuration above it (or the defaults). ``jobs`` defaults to the number
    of usable cores. With ``cache``, findings of files whose content did not
    change since an earlier run with the same settings are read from
    ``.patchscope_cache/`` instead of being parsed again, and the new ones are
    written there. ``PS008`` (unused suppressions) is reported only with
    ``report_unused_suppressions``. A path that does not exist is a
    ``PS000`` finding (whatever is selected) and the other paths are still
    linted; bad settings raise :class:`ConfigError`. Files that cannot be
    read, decoded or parsed are findings (``PS000``), not errors. Starts its own
    worker processes; concurrent calls do not interfere (concurrent runs
    sharing a cache at worst parse a file again).
    """
    selector = FileSelector(config)
    files = selector.collect(paths)
    store = Cache() if cache else None
    per_file: list[list[Finding] | None] = [None] * len(files)
    todo: list[tuple[int, RuleSet]] = []
    keys: list[str | None] = [None] * len(files)
    sizes: list[int] = []
    for index, path in enumerate(files):
        if not os.path.lexists(path):
            message = "no such file or directory; check the path"
            per_file[index] = [Finding(path, 1, 1, PARSE_ERROR, message, 1, 1)]
            sizes.append(0)
            continue
        rules = selector.rules(path)
        if store is None:
            sizes.append(_size(path))
        else:
            data = _read(path)
            sizes.append(0 if data is None else len(data))
            if data is not None:
                key = keys[index] = digest(data)
                per_file[index] = store.get(selector.settings(path), path, key)
        if per_file[index] is None:
            todo.append((index, rules))
    work = [(files[index], rules) for index, rules in todo]
    results = run_chunked(
        functools.partial(_check_chunk, with_keys=store is not None),
        work,
        [sizes[index] for index, _ in todo],
        jobs,
    )
    for (index, _), (checked, found) in zip(todo, results, strict=True):
        per_file[index] = found
        if store is not None and checked is not None and checked == keys[index]:
            store.put(selector.settings(files[index]), files[index], checked, found)
    if store is not None:
        store.save()
    findings = sorted(
        finding
        for found in per_file
        for finding in found or ()
        if report_unused_suppressions or finding.code != UNUSED_SUPPRESSION
    )
    return LintResult(tuple(findings), len(files))


def lint_source(
    data: bytes,
    path: str,
    config: LintConfig | None = None,
    *,
    report_unused_suppressions: bool = False,
) -> LintResult:
    """Lint ``data`` as the file ``path`` (which need not exist): stdin mode.

    The settings are ``config``, else the nearest configuration above
    ``path``; ``exclude`` applies to ``path`` as to a named file. Nothing is
    cached. Pure apart from reading configuration files; safe from any thread.
    """
    selector = FileSelector(config)
    if selector.excluded(path):
        return LintResult((), 0)
    found = check_source(data, path, selector.rules(path))
    if not report_unused_suppressions:
        found = [f for f in found if f.code != UNUSED_SUPPRESSION]
    return LintResult(tuple(found), 1)


def _check_chunk(
    items: list[tuple[str, RuleSet]], *, with_keys: bool
) -> list[tuple[str | None, list[Finding]]]:
    results: list[tuple[str | None, list[Finding]]] = []
    for path, rules in items:
        data = _read(path)
        if data is None:
            results.append((None, check_file(path, rules)))  # says why it cannot be read
        else:
            # The digest of the bytes actually checked, so a file that changes
            # while the run reads it is never cached under the old content.
            key = digest(data) if with_keys else None
            results.append((key, check_source(data, path, rules)))
    return results


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError:
        return None


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # reported as PS000 when the worker cannot read it
