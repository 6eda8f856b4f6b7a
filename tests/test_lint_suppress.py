"""Tests for patchscope.lint._suppress: exact directives, malformed and unused ones."""

from __future__ import annotations

import pytest

from patchscope.lint._checker import check_source
from patchscope.lint._rules import CODES, RuleSet
from patchscope.lint._suppress import marked_lines

ALL = RuleSet(CODES)


def codes(source: str, rules: RuleSet = ALL) -> list[tuple[int, str]]:
    """(line, code) of each finding of ``source`` with every code selected."""
    return [(f.line, f.code) for f in check_source(source.encode(), "t.py", rules)]


def messages(source: str) -> list[str]:
    """The message of each finding of ``source``."""
    return [f.message for f in check_source(source.encode(), "t.py", ALL)]


@pytest.mark.parametrize(
    ("comment", "fragment"),
    [
        ("# patchscope: ignore [PS001]", "write '# patchscope: ignore[PS001]'"),
        ("# patchscope: ignore: PS001", "write '# patchscope: ignore[PS001]'"),
        ("# patchscope: ignore-all", "unexpected '-' after 'ignore'"),
        ("# patchscope: ignored", "unexpected 'd' after 'ignore'"),
        ("# patchscope: ignore[PS1]", "unknown code 'PS1'"),
        ("# patchscope: ignore[]", "'[]' names no code"),
        ("# patchscope: ignore[PS001", "'[' is never closed"),
        ("# patchscope: disable[PS001]", "unknown directive"),
        ("# patchscope: ignore-file [PS001]", "ignore-file[PS001]"),
    ],
)
def test_malformed_directives_are_ps007_and_silence_nothing(comment: str, fragment: str) -> None:
    """A directive that is not exactly right is reported and leaves the line reported."""
    source = f"import torch\ntorch.cuda.Event()  {comment}\n"
    assert codes(source) == [(2, "PS001"), (2, "PS007")]
    assert fragment in messages(source)[1]


def test_malformed_position_covers_the_directive() -> None:
    """PS007 points at the directive inside the comment, up to its end."""
    source = "x = 1  # note  # patchscope: ignore [PS001]\n"
    [finding] = check_source(source.encode(), "t.py", ALL)
    assert (finding.column, finding.end_column) == (16, 44)
    assert "'# patchscope: ignore [PS001]'" in finding.message


def test_directives_in_strings_are_not_directives() -> None:
    """The text of a directive inside a string literal neither silences nor is reported."""
    source = 'import torch\ntorch.cuda.Event(); s = "# patchscope: ignore [PS001]"\n'
    assert codes(source) == [(2, "PS001")]
    source = 'import torch\ntorch.cuda.Event(); s = "# patchscope: ignore"\n'
    assert codes(source) == [(2, "PS001")]


def test_a_directive_quoted_in_a_comment_is_prose() -> None:
    """A comment that quotes ``# patchscope:`` mid-text is neither a directive nor PS007."""
    source = "import torch\ntorch.cuda.Event()  #: see ``# patchscope: ignore [X]`` in docs\n"
    assert codes(source) == [(2, "PS001")]
    source = "import torch\ntorch.cuda.Event()  # noqa: E501  # patchscope: ignore[PS001]\n"
    assert codes(source) == []


def test_file_level_directive_silences_its_codes_everywhere() -> None:
    """``# patchscope: ignore-file[...]`` silences those codes in the whole file."""
    source = (
        "# patchscope: ignore-file[PS001]\nimport torch\n"
        "torch.cuda.Event()\ntorch.cuda.synchronize()\ntorch.cuda.empty_cache()\n"
    )
    assert codes(source) == [(5, "PS002")]
    assert codes("# patchscope: ignore-file\nimport torch\ntorch.cuda.Event()\n") == []


def test_file_level_directive_silences_a_parse_error() -> None:
    """A file that cannot parse can still opt out of PS000 with a file-level directive."""
    assert codes("# patchscope: ignore-file[PS000]\nprint 'py2'\n") == []
    assert codes("print 'py2'  # torch.cuda\n") == [(1, "PS000")]


def test_unused_codes_and_directives_are_ps008() -> None:
    """Each code, or bare directive, that silences nothing is reported once."""
    source = (
        "import torch\n"
        "torch.cuda.Event()  # patchscope: ignore[PS001, PS002]\n"
        "x = 1  # patchscope: ignore\n"
        "# patchscope: ignore-file[PS006]\n"
    )
    assert codes(source) == [(2, "PS008"), (3, "PS008"), (4, "PS008")]
    first, second, third = messages(source)
    assert first.startswith("PS002 in '# patchscope: ignore[PS001, PS002]' silences nothing")
    assert second == "'# patchscope: ignore' silences nothing on this line; remove it"
    assert "silences nothing in this file" in third


def test_unused_message_says_when_a_code_is_not_selected() -> None:
    """A suppression of a deselected code silences nothing, and says why."""
    rules = RuleSet(set(CODES) - {"PS004"})
    source = "import torch\ntorch.cuda.manual_seed(0)  # patchscope: ignore[PS004]\n"
    [finding] = check_source(source.encode(), "t.py", rules)
    assert finding.code == "PS008"
    assert "(PS004 not selected for this file)" in finding.message


def test_file_level_wins_and_the_line_directive_is_then_unused() -> None:
    """File-level directives apply first, so a line directive behind one is unused."""
    source = (
        "# patchscope: ignore-file[PS001]\nimport torch\n"
        "torch.cuda.Event()  # patchscope: ignore[PS001]\n"
    )
    assert codes(source) == [(3, "PS008")]


def test_ps008_can_be_silenced_per_file_and_is_not_reported_unless_selected() -> None:
    """``ignore-file[PS008]`` keeps a file's unused suppressions quiet."""
    source = "# patchscope: ignore-file[PS008]\nx = 1  # patchscope: ignore\n"
    assert codes(source) == []
    without = RuleSet(set(CODES) - {"PS008"})
    assert codes("x = 1  # patchscope: ignore\n", without) == []


def test_directives_in_a_file_that_does_not_tokenize() -> None:
    """A file the tokenizer rejects still has its directives read, line by line."""
    source = "x = (\n# patchscope: ignore-file[PS000]\n"
    assert codes(source) == []


def test_extended_suppression_comments_silence_their_line() -> None:
    """A marker from extend-suppression-comments silences every finding on its line."""
    rules = RuleSet(CODES, suppression_comments=["ignore-cuda"])
    source = (
        "import torch\n"
        "torch.cuda.synchronize() #ignore-cuda\n"
        "torch.cuda.empty_cache()  # noqa: E501 # ignore-cuda: sanctioned\n"
        "torch.cuda.Event()  # ignore-cudagraph\n"
        "x = '#ignore-cuda'; torch.cuda.Stream()\n"
    )
    assert codes(source, rules) == [(4, "PS001"), (5, "PS001")]
    assert len(codes(source)) == 4


def test_marked_lines_reads_comments_only() -> None:
    """Only comment tokens count; a marker in a string is not one."""
    text = "a = 1  #ignore-cuda\nb = '#ignore-cuda'\n"
    assert marked_lines(text, ["ignore-cuda"]) == {1}
    assert marked_lines(None, ["ignore-cuda"]) == set()
