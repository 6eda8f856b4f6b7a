"""Tests for patchscope.lint._fix: the safe rewrites, their limits, and the fix table."""

from __future__ import annotations

import ast

import pytest

from patchscope.lint._checker import check_source
from patchscope.lint._fix import FIXES, REFUSED, fix_source, unified_diff
from patchscope.lint._rules import CODES, RuleSet

ALL = RuleSet(CODES)


def fixed(source: bytes) -> tuple[bytes, int]:
    """``source`` after fixing what the checker reports in it."""
    return fix_source(source, check_source(source, "t.py", ALL))


def test_fix_rewrites_calls_and_leaves_comments_and_strings() -> None:
    """Only the code spans change; comments, strings and unsafe calls are kept."""
    source = (
        b"import torch\n"
        b"torch.cuda.synchronize()  # torch.cuda.synchronize()\n"
        b"s = 'torch.cuda.empty_cache()'; torch.cuda.empty_cache()\n"
        b"torch.cuda.synchronize('cuda:1')\n"
        b"torch.cuda.Event()\n"
        b"n = torch.cuda.current_device() + torch.cuda.device_count()\n"
    )
    after, count = fixed(source)
    assert count == 4
    assert after == (
        b"import torch\n"
        b"torch.accelerator.synchronize()  # torch.cuda.synchronize()\n"
        b"s = 'torch.cuda.empty_cache()'; torch.accelerator.empty_cache()\n"
        b"torch.cuda.synchronize('cuda:1')\n"
        b"torch.cuda.Event()\n"
        b"n = torch.accelerator.current_device_index() + torch.accelerator.device_count()\n"
    )


def test_fix_is_idempotent() -> None:
    """A second fix of a fixed file changes nothing."""
    once, _ = fixed(b"import torch\ntorch.cuda.synchronize()\ntorch.cuda.memory_allocated()\n")
    assert fixed(once) == (once, 0)


def test_fix_keeps_newlines_and_encoding() -> None:
    """CRLF line ends and a declared encoding survive the rewrite byte for byte."""
    source = "# coding: latin-1\r\nimport torch\r\nx = 'é'; torch.cuda.synchronize()\r\n"
    after, count = fixed(source.encode("latin-1"))
    assert count == 1
    expected = "# coding: latin-1\r\nimport torch\r\nx = 'é'; torch.accelerator.synchronize()\r\n"
    assert after == expected.encode("latin-1")


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(b"import torch as t\nt.cuda.synchronize()\n", id="alias"),
        pytest.param(b"from torch import cuda\ncuda.synchronize()\n", id="from import"),
        pytest.param(
            b"import torch\ntorch.cuda.synchronize()  # patchscope: ignore[PS001]\n",
            id="suppressed",
        ),
        pytest.param(b"import torch\nf = torch.cuda.synchronize\n", id="not called"),
    ],
)
def test_fix_leaves_what_it_cannot_spell_safely(source: bytes) -> None:
    """Aliases, suppressed findings and uncalled references are not rewritten."""
    assert fixed(source) == (source, 0)


def test_fix_table_names_existing_safe_replacements() -> None:
    """Every fix replaces a torch.accelerator function, says why, and none is refused."""
    torch = pytest.importorskip("torch")
    for api, (replacement, why) in FIXES.items():
        assert api not in REFUSED
        assert why
        module, _, name = replacement.rpartition(".")
        assert module == "torch.accelerator"
        assert callable(getattr(torch.accelerator, name))
    assert "torch.cuda.Event" in REFUSED


def test_fixed_source_still_parses() -> None:
    """The rewrite yields valid Python with the same statement count."""
    source = b"import torch\nif torch.cuda.device_count():\n    torch.cuda.empty_cache()\n"
    after, _ = fixed(source)
    assert len(ast.parse(after).body) == len(ast.parse(source).body)


def test_unified_diff_names_the_file() -> None:
    """The diff has a/ and b/ headers and the changed line."""
    diff = unified_diff("p.py", b"a\nb\n", b"a\nc\n")
    assert diff.splitlines()[:2] == ["--- a/p.py", "+++ b/p.py"]
    assert "-b" in diff.splitlines() and "+c" in diff.splitlines()
