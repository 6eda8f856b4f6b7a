"""Parse source written for a newer Python than the one running the lint.

``ast`` parses only the running interpreter's grammar, so a project whose
code uses ``type X = ...`` (3.12) is unreadable to a lint run by 3.11. When a
file does not parse, each line is given a column-preserving rewrite for the
newer constructs the running Python lacks (``type X`` becomes ``type;X``,
a type parameter's default ``= int`` spaces, ``except A, B:`` becomes
``except(A, B):``, a t-string an f-string), and the
file is parsed once more: names keep their columns, so findings land where
they are in the real file. Where that does not help (nested f-string quotes
before 3.12), the syntax error says which Python the file needs.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class _Feature:
    """A construct newer than some Pythons, how to spot it, how to rewrite it."""

    name: str
    since: tuple[int, int]
    pattern: re.Pattern[str]
    rewrite: Callable[[re.Match[str]], str]


#: A bracketed list that may hold bracketed items one level deep:
#: ``[K, V: dict[str, int]]``.
_BRACKETS = r"\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]"


def _blank_brackets(match: re.Match[str]) -> str:
    # ``def f[T](x)`` -> ``def f   (x)``: type parameters become spaces.
    return match.group(1) + " " * len(match.group(2))


def _blank_defaults(match: re.Match[str]) -> str:
    # ``class C[T = int]`` -> ``class C[T      ]``: each default, from its
    # ``=`` to the next comma outside brackets, becomes spaces.
    kept: list[str] = []
    depth, blanking = 0, False
    for char in match.group(2):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if depth == 1 and char == "=":
            blanking = True
        elif depth == 0 or (depth == 1 and char == ","):
            blanking = False
        kept.append(" " if blanking else char)
    return match.group(1) + "".join(kept)


def _parenthesize(match: re.Match[str]) -> str:
    # ``except A, B:`` -> ``except(A, B):``; the names keep their columns.
    return f"{match.group(1)}({match.group(2)}){match.group(3)}"


# Each line goes through these in order: type parameter defaults come before
# the type statement and type parameter rewrites, which would hide them.
_FEATURES = (
    _Feature(
        "except*",
        (3, 11),
        re.compile(r"^(\s*except\s*)\*"),
        lambda m: m.group(1) + " ",
    ),
    _Feature(
        "star-unpacking in subscripts and annotations (*Ts)",
        (3, 11),
        re.compile(r"([\[,:]\s*)\*(?=[A-Za-z_])"),
        lambda m: m.group(1) + " ",
    ),
    _Feature(
        "type parameter defaults",
        (3, 13),
        re.compile(
            r"^(\s*(?:(?:async\s+)?(?:def|class)|type)\s+[A-Za-z_]\w*\s*)"
            # Only brackets with an ``=`` outside the inner brackets.
            r"(?=\[(?:[^\[\]=]|\[[^\[\]]*\])*=)(" + _BRACKETS + ")"
        ),
        _blank_defaults,
    ),
    _Feature(
        "type statements",
        (3, 12),
        re.compile(r"^(\s*type)\s(?=\s*[A-Za-z_]\w*\s*[\[=])"),
        lambda m: m.group(1) + ";",
    ),
    _Feature(
        "type parameters",
        (3, 12),
        re.compile(r"^(\s*(?:async\s+)?(?:def|class)\s+[A-Za-z_]\w*\s*)(" + _BRACKETS + ")"),
        _blank_brackets,
    ),
    _Feature(
        "except without parentheses around several types",
        (3, 14),
        re.compile(r"^(\s*except\*?)\s([^(:#][^:#]*,[^:#]*?)(\s*:)"),
        _parenthesize,
    ),
    _Feature(
        "t-strings",
        (3, 14),
        re.compile(r"(?<![\w\"'])([rR]?)[tT](?=[rR]?[\"'])"),
        lambda m: m.group(1) + "f",
    ),
    _Feature(
        "lazy imports",
        (3, 15),
        re.compile(r"^(\s*lazy)\s(?=\s*(?:import|from)\s)"),
        lambda m: m.group(1) + ";",
    ),
)

_RUNNING = sys.version_info[:2]
# The constructs this Python does not have.
_NEWER = tuple(feature for feature in _FEATURES if feature.since > _RUNNING)


def parse(data: bytes, path: str) -> ast.Module:
    """The module ``data`` holds, also when it uses syntax newer than this Python.

    Raises :class:`SyntaxError` (with a message naming the Python the file
    needs, when that is the reason), :class:`ValueError` for null bytes before
    3.12, :class:`RecursionError` or :class:`MemoryError`. Pure function.
    """
    with warnings.catch_warnings():
        # Invalid escape sequences warn while parsing; they are not ours to
        # report, and workers would print them to the user's terminal.
        warnings.simplefilter("ignore")
        try:
            return ast.parse(data, filename=path)
        except SyntaxError as error:
            first = error
        try:
            text = importlib.util.decode_source(data)
        except (SyntaxError, UnicodeDecodeError, LookupError):
            raise first from None
        lines = text.splitlines(keepends=True)
        rewritten = False
        for number, line in enumerate(lines):
            for feature in _NEWER:
                if feature.pattern.search(line) is not None:
                    line = feature.pattern.sub(feature.rewrite, line)
                    rewritten = True
            lines[number] = line
        if rewritten:
            try:
                return ast.parse("".join(lines), filename=path)
            except SyntaxError as error:
                # The rewrite got past the first error: the file's real
                # obstacle is where the rewritten text stops (a nested-quote
                # f-string after a ``type`` statement), not the construct
                # that was rewritten.
                first = error
        # Name a Python only for constructs on the line the parser stopped
        # at, so that a Python 2 file is not told to wait for 3.14.
        original = text.splitlines()
        line = original[first.lineno - 1] if first.lineno and first.lineno <= len(original) else ""
        found = {f.name: f.since for f in _NEWER if f.pattern.search(line) is not None}
        raise SyntaxError(_explain(first, found), _location(first)) from None


def _location(error: SyntaxError) -> tuple[str | None, int | None, int | None, str | None]:
    return (error.filename, error.lineno, error.offset, error.text)


def _explain(error: SyntaxError, found: dict[str, tuple[int, int]]) -> str:
    message = error.msg
    if not found and _RUNNING < (3, 12) and message.startswith("f-string"):
        # 3.12 lifted the old limits (PEP 701): nested quotes, backslashes
        # and comments inside the braces.
        found = {"f-strings nesting quotes, backslashes or comments": (3, 12)}
    if not found:
        return message
    needed = max(found.values())
    names = ", ".join(sorted(found, key=lambda name: found[name]))
    return (
        f"{message}; the file uses syntax newer than this Python "
        f"{_RUNNING[0]}.{_RUNNING[1]} ({names}): run the lint with Python "
        f"{needed[0]}.{needed[1]} or newer"
    )
