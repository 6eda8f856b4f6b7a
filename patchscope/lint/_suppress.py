"""Suppression comments: find them exactly, report malformed and unused ones.

Two directives exist, each with or without a list of codes::

    x = torch.cuda.Event()  # patchscope: ignore[PS001]   this line, these codes
    # patchscope: ignore-file[PS002]                       the whole file

Only real comments count: a file that mentions ``patchscope:`` at all is
tokenized, so the text in a string literal is never a directive. Within a
comment a directive starts it or follows white space (``# noqa: E501  #
patchscope: ignore``), so a comment that quotes one in prose is not one. Anything
after ``# patchscope:`` that is not exactly one of the two forms (``ignore
[PS001]`` with a space, ``ignore-all``, ``ignore: PS001``, an unknown code) is
reported as ``PS007`` and silences nothing, the mistake ``# noqa`` users know
from flake8, where a typo silently ignores every code on the line.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from ._finding import Finding
from ._rules import CODES, MALFORMED_SUPPRESSION, UNUSED_SUPPRESSION

_MARKER = b"patchscope:"
_START = re.compile(r"#\s*patchscope:\s*")
_VERB = re.compile(r"ignore-file|ignore")
_CODE = re.compile(r"PS\d{3}")
_EXAMPLE = "write '# patchscope: ignore[PS001]' or '# patchscope: ignore-file[PS001]'"


@dataclass
class Directive:
    """One well-formed directive, and which of its codes silenced something.

    ``codes`` is ``None`` for every code. Mutable only while one file is being
    checked; never shared between threads.
    """

    line: int
    column: int
    end_column: int
    text: str
    file_level: bool
    codes: frozenset[str] | None
    used: set[str] = field(default_factory=set)

    def covers(self, code: str) -> bool:
        return self.codes is None or code in self.codes


def scan(path: str, data: bytes, text: str | None) -> tuple[list[Directive], list[Finding]]:
    """The directives in a file's comments, and a ``PS007`` per malformed one.

    ``text`` is the decoded source, or ``None`` when it could not be decoded
    (then there are no directives). Pure function.
    """
    if _MARKER not in data or text is None:
        return [], []
    directives: list[Directive] = []
    malformed: list[Finding] = []
    for line, column, comment in _comments(text):
        for start in _START.finditer(comment):
            if start.start() and not comment[start.start() - 1].isspace():
                continue  # quoted in prose (``# patchscope:``), not a directive
            directive, problem = _parse(comment, start.start(), start.end())
            directive.line = line
            directive.column += column
            directive.end_column += column
            if problem is None:
                directives.append(directive)
            else:
                malformed.append(
                    Finding(
                        path,
                        line,
                        directive.column,
                        MALFORMED_SUPPRESSION,
                        f"malformed suppression {directive.text!r}: {problem}",
                        line,
                        directive.end_column,
                    )
                )
    return directives, malformed


def marked_lines(text: str | None, markers: Sequence[str]) -> set[int]:
    """The lines whose comment holds one of ``markers`` (``extend-suppression-comments``).

    A marker counts right after a comment's ``#`` or after white space in it,
    and must end there or be followed by a non-word character: with the
    marker ``ignore-cuda``, ``x()  #ignore-cuda`` and ``# ignore-cuda: why``
    are marked, ``# ignore-cudagraph`` is not. Such a line reports nothing
    but ``PS000``. Pure function.
    """
    if text is None or not markers:
        return set()
    pattern = re.compile(
        r"(?:#|\s)\s*(?:" + "|".join(re.escape(m) for m in markers) + r")(?![\w-])"
    )
    return {
        line
        for line, _, comment in _comments(text, lambda c: any(m in c for m in markers))
        if pattern.search(comment) is not None
    }


def _comments(
    text: str, wanted: Callable[[str], bool] = lambda comment: "patchscope:" in comment
) -> Iterable[tuple[int, int, str]]:
    """``(line, 1-based column, text)`` of each comment token ``wanted`` accepts."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and wanted(token.string):
                found.append((token.start[0], token.start[1] + 1, token.string))
    except (tokenize.TokenError, SyntaxError):
        # A file the tokenizer rejects is a PS000 finding anyway; read its
        # comments line by line, from the first ``#`` before the marker.
        found = []
        for number, line in enumerate(text.splitlines(), 1):
            start = line.find("#")
            if start >= 0 and wanted(line[start:]):
                match = _START.search(line)
                at = match.start() if match is not None else start
                found.append((number, at + 1, line[at:]))
    return found


def _parse(comment: str, start: int, body: int) -> tuple[Directive, str | None]:
    """The directive starting at ``comment[start]``, and what is wrong with it."""
    end = comment.find("#", body)
    end = len(comment) if end < 0 else end
    written = comment[start:end].rstrip()
    directive = Directive(0, start, start + len(written), written, False, None)
    verb = _VERB.match(comment, body)
    if verb is None:
        return directive, f"unknown directive; {_EXAMPLE}"
    directive.file_level = verb.group() == "ignore-file"
    after = verb.end()
    rest = comment[after:end]
    if rest[:1] == "[":
        close = rest.find("]")
        if close < 0:
            return directive, f"'[' is never closed; {_EXAMPLE}"
        names = [name.strip() for name in rest[1:close].split(",")]
        if names == [""]:
            return directive, "'[]' names no code; list codes, or drop the brackets for every code"
        for name in names:
            if name not in CODES:
                return directive, f"unknown code {name!r}; known codes: {', '.join(CODES)}"
        directive.codes = frozenset(names)
        rest = rest[close + 1 :]
    if rest and not rest[0].isspace():
        return directive, f"unexpected {rest[0]!r} after {verb.group()!r}; {_EXAMPLE}"
    tail = rest.lstrip()
    if tail[:1] in ("[", ":"):
        codes = re.findall(_CODE, tail)
        fixed = f"# patchscope: {verb.group()}[{', '.join(codes) or 'PS001'}]"
        problem = f"codes must follow {verb.group()!r} directly in brackets; write {fixed!r}"
        return directive, problem
    return directive, None


def apply(
    path: str,
    findings: Sequence[Finding],
    directives: Sequence[Directive],
    codes: frozenset[str],
) -> list[Finding]:
    """``findings`` minus the suppressed ones, plus a ``PS008`` per unused code.

    File-level directives are applied first, then the directives on each
    finding's line. ``codes`` are the codes reported for this file, so an
    unused-suppression message can say when a code is not selected at all.
    """
    if not directives:
        return list(findings)
    whole_file = [d for d in directives if d.file_level]
    by_line: dict[int, list[Directive]] = {}
    for directive in directives:
        if not directive.file_level:
            by_line.setdefault(directive.line, []).append(directive)
    kept = []
    for finding in findings:
        cover = next((d for d in whole_file if d.covers(finding.code)), None)
        if cover is None:
            cover = next((d for d in by_line.get(finding.line, ()) if d.covers(finding.code)), None)
        if cover is None:
            kept.append(finding)
        else:
            cover.used.add(finding.code)
    if UNUSED_SUPPRESSION not in codes:
        return kept
    unused = [_unused(path, d, codes) for d in directives]
    reported = [f for f in unused if f is not None]
    # ``ignore-file[PS008]`` keeps a file's unused suppressions quiet.
    if reported and any(d.codes is not None and UNUSED_SUPPRESSION in d.codes for d in whole_file):
        return kept
    return kept + reported


def _unused(path: str, directive: Directive, codes: frozenset[str]) -> Finding | None:
    where = "in this file" if directive.file_level else "on this line"
    if directive.codes is None:
        if directive.used:
            return None
        message = f"{directive.text!r} silences nothing {where}; remove it"
    else:
        idle = sorted(directive.codes - directive.used - {UNUSED_SUPPRESSION})
        if not idle:
            return None
        names = ", ".join(idle)
        message = f"{names} in {directive.text!r} silence{'s' * (len(idle) == 1)} nothing {where}"
        off = [code for code in idle if code not in codes]
        if off:
            message += f" ({', '.join(off)} not selected for this file)"
        message += "; remove " + ("them" if len(idle) > 1 else "it")
    return Finding(
        path,
        directive.line,
        directive.column,
        UNUSED_SUPPRESSION,
        message,
        directive.line,
        directive.end_column,
    )
