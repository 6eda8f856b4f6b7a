"""The README's lint example is real: its output is what the lint prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchscope.lint import main

README = Path(__file__).parent.parent / "README.md"


def test_readme_example_run_matches_the_lint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running the README's example.py prints the README's output and exit status."""
    section = README.read_text().split("## Lint: hard-coded torch.cuda calls", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, re.S)
    console = re.search(
        r"\$ patchscope lint --statistics example.py\n(.*?)\$ echo \$\?\n(\d+)\n", section, re.S
    )
    assert source is not None and console is not None
    (tmp_path / "example.py").write_text(source.group(1))
    monkeypatch.chdir(tmp_path)
    assert main(["--statistics", "example.py"]) == int(console.group(2))
    assert capsys.readouterr().out == console.group(1)
