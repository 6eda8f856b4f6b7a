"""Tests for patchscope.lint._cache: findings of unchanged files come from the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from patchscope.lint import _run, lint_paths, read_config
from patchscope.lint._cache import CACHE_DIR

DIRTY = "import torch\ntorch.cuda.Event()\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A configured project with one dirty and one clean file."""
    (tmp_path / "pyproject.toml").write_text("[tool.patchscope.lint]\n")
    (tmp_path / "a.py").write_text(DIRTY)
    (tmp_path / "b.py").write_text("x = 1\n")
    return tmp_path


def forbid_parsing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every file the run parses; returns the list it fills."""
    parsed: list[str] = []
    real = _run.check_source

    def check(data: bytes, path: str, rules: object) -> object:
        parsed.append(Path(path).name)
        return real(data, path, rules)  # type: ignore[arg-type]

    monkeypatch.setattr(_run, "check_source", check)
    return parsed


def test_unchanged_files_are_not_parsed_again(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second run reads findings from the cache and parses nothing."""
    first = lint_paths([str(project)], cache=True)
    parsed = forbid_parsing(monkeypatch)
    assert lint_paths([str(project)], cache=True) == first
    assert parsed == []
    assert [f.api for f in first.findings] == ["torch.cuda.Event"]


def test_changed_content_is_parsed_again(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose bytes changed is parsed again, and only that one."""
    lint_paths([str(project)], cache=True)
    (project / "b.py").write_text(DIRTY)
    parsed = forbid_parsing(monkeypatch)
    result = lint_paths([str(project)], cache=True)
    assert parsed == ["b.py"]
    assert len(result.findings) == 2


def test_changed_settings_use_another_cache(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New settings never reuse findings computed under the old ones."""
    lint_paths([str(project)], cache=True)
    (project / "pyproject.toml").write_text('[tool.patchscope.lint]\nignore = ["PS001"]\n')
    parsed = forbid_parsing(monkeypatch)
    assert lint_paths([str(project)], cache=True).findings == ()
    assert sorted(parsed) == ["a.py", "b.py"]


def test_cache_lives_under_the_configuration_with_a_gitignore(project: Path) -> None:
    """The cache is written beside the configuration, and tells git to ignore it."""
    lint_paths([str(project / "a.py")], cache=True)
    cache = project / CACHE_DIR
    assert (cache / ".gitignore").read_text().splitlines()[-1] == "*"
    [document] = list(cache.glob("*/*.json"))
    assert list(json.loads(document.read_text())["files"]) == [str(project / "a.py")]


def test_without_configuration_the_cache_is_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files no configuration governs are cached in the working directory."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text(DIRTY)
    monkeypatch.chdir(tmp_path)
    lint_paths(["src"], cache=True)
    assert (tmp_path / CACHE_DIR / ".gitignore").exists()
    assert not (tmp_path / "src" / CACHE_DIR).exists()


def test_explicit_config_puts_the_cache_beside_it(tmp_path: Path) -> None:
    """With --config, the cache goes to that file's directory."""
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "lint.toml").write_text("[tool.patchscope.lint]\n")
    (tmp_path / "a.py").write_text(DIRTY)
    lint_paths([str(tmp_path / "a.py")], read_config(tmp_path / "ci" / "lint.toml"), cache=True)
    assert (tmp_path / "ci" / CACHE_DIR).is_dir()
    assert not (tmp_path / CACHE_DIR).exists()


def test_no_cache_writes_nothing(project: Path) -> None:
    """Without cache=True (the CLI's --no-cache), nothing is written."""
    lint_paths([str(project)])
    assert not (project / CACHE_DIR).exists()


def test_a_corrupt_cache_is_rebuilt(project: Path) -> None:
    """A damaged cache file is ignored and replaced, never trusted."""
    first = lint_paths([str(project)], cache=True)
    [document] = list((project / CACHE_DIR).glob("*/*.json"))
    document.write_text("{not json")
    assert lint_paths([str(project)], cache=True) == first
    json.loads(document.read_text())


def test_unwritable_cache_warns_and_the_run_goes_on(project: Path) -> None:
    """A cache that cannot be written is a warning; the findings are unaffected."""
    (project / CACHE_DIR).write_text("a file where the directory should be")
    with pytest.warns(RuntimeWarning, match="cannot write the cache"):
        result = lint_paths([str(project)], cache=True)
    assert len(result.findings) == 1
