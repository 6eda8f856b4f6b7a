"""Tests for patchscope.lint._checker's patch rules (PS010 to PS013) and their targets."""

from __future__ import annotations

import textwrap

import pytest

from patchscope.lint._checker import check_source
from patchscope.lint._rules import CODES, UNUSED_SUPPRESSION, RuleSet

DEFAULT = RuleSet(set(CODES) - {UNUSED_SUPPRESSION})


def found(source: str, rules: RuleSet = DEFAULT) -> list[tuple[int, str, str | None]]:
    """(line, code, api) of each finding in the dedented ``source``."""
    data = textwrap.dedent(source).encode()
    return [(f.line, f.code, f.api) for f in check_source(data, "t.py", rules)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "import torch\ntorch.cuda.Event = torch.xpu.Event\n",
            [(2, "PS010", "torch.cuda.Event")],
            id="assignment",
        ),
        pytest.param(
            "import torch.cuda as tc\ntc.stream = None\n",
            [(2, "PS010", "torch.cuda.stream")],
            id="assignment through an alias",
        ),
        pytest.param(
            "import torch\ndel torch.cuda.Stream\n",
            [(2, "PS010", "torch.cuda.Stream")],
            id="del",
        ),
        pytest.param(
            "import torch\ntorch.cuda.counter += 1\n",
            [(2, "PS010", "torch.cuda.counter")],
            id="augmented assignment",
        ),
        pytest.param(
            "import torch\nsetattr(torch.cuda, 'Event', object)\n",
            [(2, "PS011", "torch.cuda.Event")],
            id="setattr",
        ),
        pytest.param(
            "import torch\ndelattr(torch.cuda, 'Event')\n",
            [(2, "PS011", "torch.cuda.Event")],
            id="delattr",
        ),
        pytest.param(
            "import torch\ndef test(monkeypatch):\n"
            "    monkeypatch.setattr(torch.cuda, 'stream', 1)\n",
            [(3, "PS011", "torch.cuda.stream")],
            id="monkeypatch.setattr",
        ),
        pytest.param(
            "def test(monkeypatch):\n    monkeypatch.setattr('torch.cuda.set_device', 1)\n",
            [(2, "PS011", "torch.cuda.set_device")],
            id="monkeypatch.setattr with a string target",
        ),
        pytest.param(
            "from unittest import mock\n@mock.patch('torch.cuda.set_device')\ndef f(m): pass\n",
            [(2, "PS012", "torch.cuda.set_device")],
            id="mock.patch string",
        ),
        pytest.param(
            "import torch\nfrom unittest.mock import patch\n"
            "with patch.object(torch.cuda, 'Event'):\n    pass\n",
            [(3, "PS012", "torch.cuda.Event")],
            id="patch.object",
        ),
        pytest.param(
            "import torch\nfrom unittest import mock\n"
            "with mock.patch.dict(torch.cuda.__dict__, {'x': 1}):\n    pass\n",
            [(3, "PS012", "torch.cuda")],
            id="patch.dict of the module's namespace",
        ),
        pytest.param(
            "import torch\nfrom unittest import mock\nmock.patch.multiple(torch.cuda, Event=1)\n",
            [(3, "PS012", "torch.cuda.Event")],
            id="patch.multiple",
        ),
    ],
)
def test_hand_written_patch_forms(source: str, expected: list[tuple[int, str, str]]) -> None:
    """Every hand-written patch form of a torch.cuda name is its own code, not a use."""
    assert found(source) == expected


def test_save_assign_restore_is_one_ps013() -> None:
    """orig = m.X; m.X = Y; try/finally m.X = orig is one finding at the patch."""
    source = """
        import torch
        def build():
            orig = torch.cuda.Event
            torch.cuda.Event = torch.xpu.Event
            try:
                return make()
            finally:
                torch.cuda.Event = orig
    """
    assert found(source) == [(5, "PS013", "torch.cuda.Event")]
    [finding] = check_source(textwrap.dedent(source).encode(), "t.py", DEFAULT)
    assert "line 5 to line 9" in finding.message
    assert "patchscope.torch.device_events()" in finding.message


def test_restore_without_ps013_selected_drops_the_shape() -> None:
    """With PS013 ignored, the shape reports nothing else in its place."""
    source = "import torch\no = torch.cuda.Event\ntorch.cuda.Event = 1\ntorch.cuda.Event = o\n"
    assert found(source, RuleSet(set(CODES) - {"PS013"})) == []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import torch\nx = object()\nx.Event = torch.xpu.Event\n", id="other object"),
        pytest.param("import torch\nsetattr(self, 'Event', 1)\n", id="setattr on self"),
        pytest.param("from unittest import mock\nmock.patch('os.getcwd')\n", id="other module"),
        pytest.param("import torch\ntorch.xpu.Event = 1  # cuda\n", id="torch.xpu"),
        pytest.param("import torch\ntorch.cuda.Event.__doc__\n", id="a read"),
    ],
)
def test_other_targets_are_not_patches(source: str) -> None:
    """Patching anything outside the patch targets, or reading, is no patch finding."""
    assert not any(code.startswith("PS01") for _, code, _ in found(source))


def test_patch_targets_cover_a_projects_own_modules() -> None:
    """patch-targets ['mypkg.*'] reports hand patches of mypkg and below, through aliases."""
    rules = RuleSet(CODES, patch_targets=["mypkg.*"])
    source = """
        import mypkg.backend as be
        import mypkg
        be.run = lambda: None
        mypkg.flag = True
        mypkg.other.x = 1
        setattr(mypkg, "y", 2)
        import torch
        torch.cuda.Event = 1
    """
    assert found(source, rules) == [
        (4, "PS010", "mypkg.backend.run"),
        (5, "PS010", "mypkg.flag"),
        (6, "PS010", "mypkg.other.x"),
        (7, "PS011", "mypkg.y"),
        (9, "PS001", "torch.cuda.Event"),
    ]


def test_exact_patch_target_covers_that_module_only() -> None:
    """A target without .* is that module alone, not its submodules."""
    rules = RuleSet(CODES, patch_targets=["mypkg"])
    assert found("import mypkg\nmypkg.x = 1\nmypkg.sub.y = 2\n", rules) == [(2, "PS010", "mypkg.x")]


def test_prefilter_skips_files_that_name_no_target() -> None:
    """A file without the targets' words is not parsed: no PS000 for its syntax error."""
    assert found("def f(:\n") == []
    assert found("def f(:  # mypkg\n", RuleSet(CODES, patch_targets=["mypkg.*"])) == [
        (1, "PS000", None)
    ]
    assert found("def f(:  # torch.cuda\n") == [(1, "PS000", None)]
    assert found("def f(:  # x.cuda()\n") == []
    assert found("from torch import (nn,\n  cuda)\ndef f(:\n") == [(3, "PS000", None)]
