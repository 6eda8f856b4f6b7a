"""Render a run's findings: flake8-style text, JSON for tools, GitHub annotations."""

from __future__ import annotations

import json
from collections import Counter

from ._rules import SUMMARIES
from ._run import LintResult

#: Bumped when a key of the JSON output changes meaning or disappears.
JSON_VERSION = 1


def statistics(result: LintResult) -> dict[str, int]:
    """Finding counts per code, ordered by code."""
    counts = Counter(finding.code for finding in result.findings)
    return dict(sorted(counts.items()))


def format_text(result: LintResult, *, with_statistics: bool = False) -> str:
    """One ``path:line:col: CODE message`` line per finding (what editors parse).

    With ``with_statistics``, a ``count CODE summary`` line per code follows.
    """
    lines = [f"{f.path}:{f.line}:{f.column}: {f.code} {f.message}" for f in result.findings]
    if with_statistics:
        lines += [
            f"{count:<5} {code} {SUMMARIES[code]}" for code, count in statistics(result).items()
        ]
    return "".join(line + "\n" for line in lines)


def format_json(result: LintResult) -> str:
    """The whole result as one JSON document (its schema is in docs/lint.md)."""
    document = {
        "version": JSON_VERSION,
        "files_checked": result.files_checked,
        "findings": [
            {
                "path": f.path,
                "line": f.line,
                "column": f.column,
                "end_line": f.end_line,
                "end_column": f.end_column,
                "code": f.code,
                "api": f.api,
                "message": f.message,
            }
            for f in result.findings
        ],
        "statistics": statistics(result),
    }
    return json.dumps(document, indent=2) + "\n"


def format_github(result: LintResult) -> str:
    """One GitHub Actions ``::error`` workflow command per finding.

    GitHub shows each as an annotation on the pull request's diff, at the
    finding's range; ``title`` is the code. Values are escaped as the runner
    expects (``%``, ``\\r``, ``\\n`` everywhere; ``:`` and ``,`` also in
    properties).
    """
    lines = []
    for f in result.findings:
        properties = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("file", f.path),
                ("line", f.line),
                ("col", f.column),
                ("endLine", f.end_line),
                ("endColumn", f.end_column),
                ("title", f.code),
            )
        )
        lines.append(f"::error {properties}::{_escape_data(f'{f.code} {f.message}')}\n")
    return "".join(lines)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
