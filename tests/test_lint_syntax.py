"""Tests for patchscope.lint._syntax: syntax newer than the running Python."""

from __future__ import annotations

import sys

import pytest

from patchscope.lint._checker import check_source
from patchscope.lint._rules import CODES, RuleSet

ALL = RuleSet(CODES)


def found(source: str) -> list[tuple[int, int, str]]:
    """(line, column, code) of each finding of ``source``."""
    # The trailing comment passes the prefilter, so even a file with no
    # finding is parsed and its syntax errors are reported.
    data = source.encode() + b"\n# torch.cuda\n"
    return [(f.line, f.column, f.code) for f in check_source(data, "t.py", ALL)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "import torch\ntype S = torch.cuda.Stream\n", [(2, 10, "PS001")], id="type (3.12)"
        ),
        pytest.param(
            "import torch\ndef f[T](x: T = torch.cuda.Event()) -> T: ...\n",
            [(2, 17, "PS001")],
            id="type parameters (3.12)",
        ),
        pytest.param(
            "import torch\nclass C[T](torch.cuda.Stream): ...\n",
            [(2, 12, "PS001")],
            id="generic class (3.12)",
        ),
        pytest.param(
            "import torch\ndef f[T: dict[str, int]](x: T = torch.cuda.Event()) -> T: ...\n",
            [(2, 33, "PS001")],
            id="type parameters with brackets (3.12)",
        ),
        pytest.param(
            "import torch\nclass C[T = int](torch.cuda.Stream): ...\n",
            [(2, 18, "PS001")],
            id="type parameter default (3.13)",
        ),
        pytest.param(
            "import torch\ntype S[T = int] = torch.cuda.Stream\n",
            [(2, 19, "PS001")],
            id="type statement with a default (3.13)",
        ),
        pytest.param(
            "import torch\n"
            "class C[T: (int, str) = int, *Ts = *tuple[int, ...], **P = [int, str]]"
            "(torch.cuda.Stream): ...\n",
            [(2, 72, "PS001")],
            id="type parameter defaults holding brackets (3.13)",
        ),
        pytest.param(
            "import torch\ntry:\n    pass\nexcept* ValueError:\n    torch.cuda.synchronize()\n",
            [(5, 5, "PS001")],
            id="except* (3.11)",
        ),
        pytest.param(
            "import torch\ntry:\n    pass\nexcept ValueError, TypeError:\n"
            "    torch.cuda.empty_cache()\n",
            [(5, 5, "PS002")],
            id="except without parentheses (3.14)",
        ),
        pytest.param(
            "import torch\nx = t'{torch.cuda.device_count()}'\n",
            [(2, 8, "PS003")],
            id="t-string (3.14)",
        ),
        pytest.param(
            "lazy import torch.cuda as tc\ntc.manual_seed(0)\n",
            [(2, 1, "PS004")],
            id="lazy import (3.15)",
        ),
    ],
)
def test_newer_syntax_is_checked_at_the_right_columns(
    source: str, expected: list[tuple[int, int, str]]
) -> None:
    """Natively on new Pythons, through a column-keeping rewrite on old ones."""
    assert found(source) == expected


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses these f-strings")
def test_nested_fstring_quotes_name_the_python_needed() -> None:
    """Where no rewrite helps, PS000 says which Python the file needs."""
    [finding] = check_source(b'import torch.cuda\nx = f"{d["k"]}"\n', "t.py", ALL)
    assert finding.code == "PS000"
    assert "run the lint with Python 3.12 or newer" in finding.message


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses type statements")
def test_rewritten_file_reports_where_it_still_fails() -> None:
    """Once a newer construct is rewritten, PS000 names the line that still fails."""
    [finding] = check_source(b"import torch.cuda\ntype X = int\nprint 'py2'\n", "t.py", ALL)
    assert finding.line == 3
    assert "type statements" not in finding.message
    assert "run the lint with Python" not in finding.message


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12 parses both")
def test_type_statement_and_nested_fstring_name_the_fstring() -> None:
    """A type statement is rewritten; the nested-quote f-string it then meets is named."""
    data = b'import torch.cuda\ntype X = int\nx = f"{d["k"]}"\n'
    [finding] = check_source(data, "t.py", ALL)
    assert finding.line == 3
    assert "f-strings nesting quotes" in finding.message
    assert "type statements" not in finding.message
    assert "Python 3.12 or newer" in finding.message


def test_python2_code_gets_no_version_hint() -> None:
    """A plain syntax error is not blamed on a newer Python."""
    [finding] = check_source(b"print 'hello'  # torch.cuda\n", "t.py", ALL)
    assert "run the lint with Python" not in finding.message
