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


def test_missing_path_is_kept_for_the_report(tmp_path: Path) -> None:
    """A path that does not exist is kept in the list, so the run reports it."""
    tree(tmp_path, "pkg/a.py")
    assert collect(tmp_path, "nope.py", "pkg") == ["nope.py", "pkg/a.py"]


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


def test_each_file_follows_its_nearest_configuration(tmp_path: Path) -> None:
    """A monorepo's sub-project keeps its own settings when linted from the root."""
    tree(tmp_path, "app/a.py", "sub/pkg/b.py", "sub/vendor/c.py")
    (tmp_path / "pyproject.toml").write_text('[tool.patchscope.lint]\nignore = ["PS004"]\n')
    (tmp_path / "sub" / "setup.cfg").write_text(
        "[tool:patchscope.lint]\nexclude = vendor\nallow = pkg\n"
    )
    selector = FileSelector()
    assert collect_with(selector, tmp_path) == ["app/a.py", "sub/pkg/b.py"]
    assert selector.settings(str(tmp_path / "app/a.py")).root == str(tmp_path)
    assert selector.settings(str(tmp_path / "sub/pkg/b.py")).root == str(tmp_path / "sub")
    assert selector.rules(str(tmp_path / "sub/pkg/b.py")).codes == {"PS000"}
    assert "PS004" not in selector.rules(str(tmp_path / "app/a.py")).codes


def test_globs_never_match_outside_their_configuration(tmp_path: Path) -> None:
    """A sub-directory's ``tests`` glob does not reach a sibling's tests."""
    tree(tmp_path, "sub/tests/a.py", "tests/b.py")
    config = LintConfig(root=str(tmp_path / "sub"), exclude=("tests",), allow=("tests",))
    selector = FileSelector(config)
    assert selector.excluded(str(tmp_path / "sub/tests/a.py"))
    assert not selector.excluded(str(tmp_path / "tests/b.py"))
    assert not selector.allowed(str(tmp_path / "tests/b.py"))


def test_per_file_ignores_remove_codes_for_matching_files(tmp_path: Path) -> None:
    """per-file-ignores globs take codes away from the files they match only."""
    config = LintConfig(
        root=str(tmp_path), per_file_ignores=(("tests/*", ("PS003",)), ("*_cuda.py", ("PS001",)))
    )
    selector = FileSelector(config)
    assert selector.rules(str(tmp_path / "tests/test_x.py")).codes == config.codes - {"PS003"}
    assert selector.rules(str(tmp_path / "ops/attn_cuda.py")).codes == config.codes - {"PS001"}
    assert selector.rules(str(tmp_path / "ops/attn.py")).codes == config.codes


def collect_with(selector: FileSelector, root: Path) -> list[str]:
    """What ``selector`` collects from ``root``, relative to it."""
    return [os.path.relpath(p, root) for p in selector.collect([str(root)])]
