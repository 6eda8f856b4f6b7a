"""Tests for patchscope.lint._rules: the rule table and dotted-path matching."""

from __future__ import annotations

import pytest

from patchscope.lint._rules import CODES, RULES, SUMMARIES, RuleSet, known_api


def test_codes_are_unique_and_ordered() -> None:
    """PS000 (parse errors) first, then the families, PS005 (extend-apis), comments."""
    assert CODES == (
        "PS000",
        "PS001",
        "PS002",
        "PS003",
        "PS004",
        "PS005",
        "PS006",
        "PS007",
        "PS008",
        "PS009",
        "PS010",
        "PS011",
        "PS012",
        "PS013",
    )
    assert [rule.code for rule in RULES] == ["PS001", "PS002", "PS003", "PS004", "PS006", "PS009"]
    assert set(SUMMARIES) == set(CODES)


def test_every_message_names_a_replacement() -> None:
    """Each API's message says what to use instead."""
    for rule in RULES:
        for api, use in rule.apis.items():
            assert use, (rule.code, api)
            assert "torch." in use, (rule.code, api, use)


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("torch.cuda.Event", ("torch.cuda.Event", "PS001", 1)),
        ("torch.cuda.Event.record", ("torch.cuda.Event", "PS001", 1)),
        ("torch.cuda.streams.Event", ("torch.cuda.Event", "PS001", 2)),
        ("torch.cuda.memory.empty_cache", ("torch.cuda.empty_cache", "PS002", 2)),
        ("torch.cuda.random.manual_seed_all", ("torch.cuda.manual_seed_all", "PS004", 2)),
        ("torch.cuda.memory_summary", ("torch.cuda.memory_summary", "PS002", 1)),
        ("torch.cuda.max_memory_cached", ("torch.cuda.max_memory_cached", "PS002", 1)),
        ("torch.cuda.memory", None),
        ("torch.cuda", None),
        ("torch.Event", None),
        ("torch.xpu.Event", None),
        ("torch.cuda.nvtx.range_push", ("torch.cuda.nvtx", "PS009", 1)),
        ("torch.cuda.nvtxx", None),
        ("torch.cudax.Event", None),
    ],
)
def test_match(path: str, expected: tuple[str, str, int] | None) -> None:
    """The shortest reported prefix below torch.cuda is matched, with its depth."""
    found = RuleSet(CODES).match(path)
    assert (found and (found.api, found.code, found.depth)) == expected


def test_exact_names_win_over_globs() -> None:
    """``memory_allocated`` gets its own suggestion, not the ``memory_*`` one."""
    found = RuleSet(CODES).match("torch.cuda.memory_allocated")
    assert found is not None
    assert found.message.endswith("use torch.accelerator.memory_allocated()")


def test_selection_and_truthiness() -> None:
    """Only selected codes match; a set selecting no API rule is falsy."""
    assert RuleSet(["PS003"]).match("torch.cuda.Event") is None
    assert RuleSet(["PS003"]).match("torch.cuda.device") is not None
    assert not RuleSet(["PS000"])
    assert not RuleSet(["PS000", "PS005"])
    assert RuleSet(["PS005"], ["is_available"])


def test_extend_apis_need_ps005_selected() -> None:
    """extend-apis report under PS005 and only when PS005 is selected."""
    assert RuleSet(["PS001"], ["is_available"]).match("torch.cuda.is_available") is None
    found = RuleSet(["PS005"], ["is_available"]).match("torch.cuda.is_available")
    assert found is not None and found.code == "PS005"
    assert "extend-apis" in found.message


def test_defaults_take_precedence_over_extend_apis() -> None:
    """Listing a default API in extend-apis keeps its family code."""
    found = RuleSet(CODES, ["Event"]).match("torch.cuda.Event")
    assert found is not None and found.code == "PS001"


def test_allow_apis_take_names_and_globs() -> None:
    """An allowed API is not matched; others of its family still are."""
    rules = RuleSet(CODES, allow_apis=["Event", "memory_*"])
    assert rules.match("torch.cuda.Event") is None
    assert rules.match("torch.cuda.streams.Event.record") is None
    assert rules.match("torch.cuda.memory_summary") is None
    assert rules.match("torch.cuda.Stream") is not None
    assert rules.match("torch.cuda.empty_cache") is not None


@pytest.mark.parametrize(
    ("name", "known"),
    [("Event", True), ("memory_stats", True), ("get_device_*", True), ("Evnt", False)],
)
def test_known_api(name: str, known: bool) -> None:
    """allow-apis entries must cover something the table reports."""
    assert known_api(name) is known
    assert known_api("is_available", ["is_available"])
