"""Tests for patchscope.lint._files: walking, excludes and the allow-list."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchscope.lint import LintConfig
from patchscope.lint._files import FileSelector


def tree(root: Path, *paths: str) -> None:
    """Create empty files (and their directories) under ``root``."""
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text("")


def collect(root: Path, *args: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """The files a run from ``root`` would read, relative to ``root``."""
    selector = FileSelector(LintConfig(root=str(root), exclude=exclude))
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return selector.collect(list(args) or ["."])
    finally:
        os.chdir(cwd)


def test_walk_finds_python_files_in_sorted_order(tmp_path: Path) -> None:
    """Directories are walked depth-first by name; only ``*.py`` files are read."""
    tree(tmp_path, "b.py", "a/z.py", "a/b/c.py", "README.md", "a/data.json", "a/stub.pyi")
    assert collect(tmp_path) == ["a/b/c.py", "a/z.py", "b.py"]


def test_tool_and_environment_directories_are_skipped(tmp_path: Path) -> None:
    """VCS, caches and virtual environments (by name or pyvenv.cfg) are not walked."""
    tree(
        tmp_path,
        "pkg/mod.py",
        ".git/hooks/x.py",
        "__pycache__/x.py",
        ".venv/lib/x.py",
        ".tox/py/x.py",
        "envs/ci/pyvenv.cfg",
        "envs/ci/lib/x.py",
        "node_modules/x.py",
    )
    assert collect(tmp_path) == ["pkg/mod.py"]


def test_a_named_path_inside_a_skipped_directory_is_read(tmp_path: Path) -> None:
    """Naming a directory on the command line reads it, even inside .venv."""
    tree(tmp_path, ".venv/lib/site-packages/torch/x.py")
    assert collect(tmp_path, ".venv/lib/site-packages/torch") == [
        ".venv/lib/site-packages/torch/x.py"
    ]


@pytest.mark.parametrize(
    ("exclude", "expected"),
    [
        (("third_party",), ["pkg/a.py", "pkg/gen/a_pb2.py"]),
        (("*_pb2.py",), ["pkg/a.py", "third_party/lib/b.py"]),
        (("pkg/gen",), ["pkg/a.py", "third_party/lib/b.py"]),
        (("pkg/gen/*",), ["pkg/a.py", "third_party/lib/b.py"]),
        (("third_party/lib/b.py", "pkg"), []),
    ],
)
def test_exclude_globs(tmp_path: Path, exclude: tuple[str, ...], expected: list[str]) -> None:
    """Slash-less globs match any component; others match the path or a parent."""
    tree(tmp_path, "pkg/a.py", "pkg/gen/a_pb2.py", "third_party/lib/b.py")
    assert collect(tmp_path, exclude=exclude) == expected


def test_exclude_applies_to_files_named_on_the_command_line(tmp_path: Path) -> None:
    """pre-commit passes file names; excluded ones are still skipped."""
    tree(tmp_path, "pkg/a.py", "third_party/b.py")
    found = collect(tmp_path, "pkg/a.py", "third_party/b.py", exclude=("third_party",))
    assert found == ["pkg/a.py"]


def test_named_files_are_read_whatever_their_extension(tmp_path: Path) -> None:
    """A script without ``.py`` (pre-commit matched its shebang) is read when named."""
    tree(tmp_path, "bin/tool")
    assert collect(tmp_path, "bin/tool") == ["bin/tool"]


def test_duplicates_are_read_once(tmp_path: Path) -> None:
    """A file reached through two arguments is read once."""
    tree(tmp_path, "pkg/a.py")
    assert collect(tmp_path, "pkg", "pkg/a.py", "./pkg/a.py") == ["pkg/a.py"]


def test_missing_path_raises(tmp_path: Path) -> None:
    """A path that does not exist is a usage error, raised as FileNotFoundError."""
    with pytest.raises(FileNotFoundError):
        collect(tmp_path, "nope.py")


def test_allow_matches_relative_to_the_config_root(tmp_path: Path) -> None:
    """allow globs mark files that may use torch.cuda, like regex prefix lists."""
    selector = FileSelector(
        LintConfig(root=str(tmp_path), allow=("pkg/platforms/cuda.py", "csrc", "*_cuda.py"))
    )
    assert selector.allowed(str(tmp_path / "pkg/platforms/cuda.py"))
    assert selector.allowed(str(tmp_path / "csrc/kernels/launch.py"))
    assert selector.allowed(str(tmp_path / "pkg/ops/attn_cuda.py"))
    assert not selector.allowed(str(tmp_path / "pkg/platforms/xpu.py"))
    assert not FileSelector(LintConfig(root=str(tmp_path))).allowed(str(tmp_path / "a.py"))
