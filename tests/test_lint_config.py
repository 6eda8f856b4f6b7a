"""Tests for patchscope.lint._config: both config files, discovery and errors."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from patchscope.lint import ConfigError, LintConfig, load_config, read_config
from patchscope.lint._rules import CODES

PYPROJECT = """
[project]
name = "demo"

[tool.patchscope.lint]
select = ["PS001", "PS002", "PS005"]
ignore = ["PS002"]
allow = ["src/demo/platforms/cuda.py", "csrc/"]
extend-apis = ["is_available", "torch.cuda.get_device_*"]
exclude = ["third_party", "./build/"]
"""

SETUP_CFG = """
[metadata]
name = demo

[tool:patchscope.lint]
select = PS001, PS002, PS005
ignore = PS002
allow =
    src/demo/platforms/cuda.py
    csrc/
extend-apis = is_available, torch.cuda.get_device_*
exclude = third_party, ./build/
"""


@pytest.mark.parametrize(
    ("name", "text"), [("pyproject.toml", PYPROJECT), ("setup.cfg", SETUP_CFG)]
)
def test_both_files_give_the_same_settings(tmp_path: Path, name: str, text: str) -> None:
    """pyproject.toml and setup.cfg take the same keys with the same meaning."""
    (tmp_path / name).write_text(text)
    config = load_config(tmp_path)
    assert config == LintConfig(
        select=("PS001", "PS002", "PS005"),
        ignore=("PS002",),
        allow=("src/demo/platforms/cuda.py", "csrc"),
        extend_apis=("is_available", "get_device_*"),
        exclude=("third_party", "build"),
        root=str(tmp_path),
        source=str(tmp_path / name),
    )
    assert config.codes == {"PS001", "PS005"}


def test_defaults_without_a_config_file(tmp_path: Path) -> None:
    """With no configuration anywhere above, every code is selected."""
    config = load_config(tmp_path)
    assert config.source is None
    assert config.codes == set(CODES)
    assert config.root == str(tmp_path)


def test_discovery_walks_up_and_roots_globs_there(tmp_path: Path) -> None:
    """The nearest configured directory above the start supplies the settings."""
    (tmp_path / "pyproject.toml").write_text('[tool.patchscope.lint]\nignore = ["PS004"]\n')
    nested = tmp_path / "src" / "pkg"
    nested.mkdir(parents=True)
    config = load_config(nested)
    assert config.ignore == ("PS004",)
    assert config.root == str(tmp_path)


def test_files_without_the_section_are_skipped(tmp_path: Path) -> None:
    """A pyproject.toml or setup.cfg that does not configure the lint is passed over."""
    (tmp_path / "pyproject.toml").write_text('[tool.patchscope.lint]\nignore = ["PS004"]\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    (inner / "setup.cfg").write_text("[tool:patchscope]\nx = 1\n")
    assert load_config(inner).source == str(tmp_path / "pyproject.toml")


def test_unrelated_broken_pyproject_is_ignored(tmp_path: Path) -> None:
    """A pyproject.toml that never mentions patchscope is not parsed."""
    (tmp_path / "pyproject.toml").write_text("this is [not toml\n")
    assert load_config(tmp_path).source is None


def test_current_directory_is_the_default_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """load_config() with no argument starts in the working directory."""
    (tmp_path / "setup.cfg").write_text("[tool:patchscope.lint]\nignore = PS003\n")
    monkeypatch.chdir(tmp_path)
    assert load_config().ignore == ("PS003",)


def test_both_files_configured_is_an_error(tmp_path: Path) -> None:
    """Settings split over two files of one directory are refused, naming both."""
    (tmp_path / "pyproject.toml").write_text("[tool.patchscope.lint]\n")
    (tmp_path / "setup.cfg").write_text("[tool:patchscope.lint]\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "pyproject.toml" in str(info.value) and "setup.cfg" in str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "key", "fragment"),
    [
        (
            "pyproject.toml",
            '[tool.patchscope.lint]\nselect = ["PS099"]\n',
            "select",
            "unknown code 'PS099'; known codes: PS000, PS001",
        ),
        ("setup.cfg", "[tool:patchscope.lint]\nignore = PS1\n", "ignore", "unknown code 'PS1'"),
        (
            "setup.cfg",
            "[tool:patchscope.lint]\nextend_apis = is_available\n",
            "extend_apis",
            "unknown key; did you mean 'extend-apis'?",
        ),
        (
            "pyproject.toml",
            '[tool.patchscope.lint]\nselekt = ["PS001"]\n',
            "selekt",
            "did you mean 'select'?",
        ),
        (
            "pyproject.toml",
            '[tool.patchscope.lint]\nexclude = "build"\n',
            "exclude",
            "expected a list of strings, got 'build'",
        ),
        (
            "pyproject.toml",
            "[tool.patchscope.lint]\nallow = [1, 2]\n",
            "allow",
            "expected a list of strings",
        ),
        (
            "pyproject.toml",
            '[tool.patchscope.lint]\nextend-apis = ["torch.xpu.Event"]\n',
            "extend-apis",
            "'torch.xpu.Event' is not a name under torch.cuda",
        ),
        (
            "setup.cfg",
            "[tool:patchscope.lint]\nextend-apis = is available\n",
            "extend-apis",
            "'is available' is not a name under torch.cuda",
        ),
    ],
)
def test_bad_values_name_file_and_key(
    tmp_path: Path, name: str, text: str, key: str, fragment: str
) -> None:
    """Every bad setting is a ConfigError naming the file, section and key."""
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    message = str(info.value)
    section = "[tool.patchscope.lint]" if name == "pyproject.toml" else "[tool:patchscope.lint]"
    assert message.startswith(f"{tmp_path / name}: {section} {key}: ")
    assert fragment in message


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("pyproject.toml", "[tool.patchscope.lint\nselect = []\n"),
        ("pyproject.toml", "[tool.patchscope]\nlint = 3\n"),
        ("setup.cfg", "[tool:patchscope.lint]\nselect\n"),
    ],
)
def test_unparsable_file_names_the_file(tmp_path: Path, name: str, text: str) -> None:
    """A config file that does not parse is an error naming it."""
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value).startswith(f"{tmp_path / name}: ")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions")
def test_unreadable_file_names_the_file(tmp_path: Path) -> None:
    """A config file that cannot be read is an error naming it."""
    path = tmp_path / "setup.cfg"
    path.write_text("[tool:patchscope.lint]\n")
    path.chmod(0)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)


def test_config_error_is_a_value_error() -> None:
    """Callers catching ValueError for bad input also catch ConfigError."""
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "pyproject.toml",
            '[tool.patchscope.lint]\nallow-apis = ["Event", "torch.cuda.Stream"]\n'
            '[tool.patchscope.lint.per-file-ignores]\n"tests/*" = ["PS003", "PS004"]\n'
            '"scripts" = ["PS001"]\n',
        ),
        (
            "setup.cfg",
            "[tool:patchscope.lint]\nallow-apis = Event, torch.cuda.Stream\n"
            "per-file-ignores =\n    tests/*: PS003, PS004\n    scripts: PS001\n",
        ),
    ],
)
def test_allow_apis_and_per_file_ignores(tmp_path: Path, name: str, text: str) -> None:
    """Both files take allow-apis (names under torch.cuda) and per-file-ignores."""
    (tmp_path / name).write_text(text)
    config = load_config(tmp_path)
    assert config.allow_apis == ("Event", "Stream")
    assert config.per_file_ignores == (("tests/*", ("PS003", "PS004")), ("scripts", ("PS001",)))


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ('allow-apis = ["Evnt"]', "allow-apis", "'Evnt' is not an API the lint reports; did you"),
        (
            '[tool.patchscope.lint.per-file-ignores]\n"tests/*" = ["PS042"]',
            "per-file-ignores 'tests/*'",
            "unknown code 'PS042'",
        ),
        ('per-file-ignores = ["tests/*"]', "per-file-ignores", "expected a table of glob"),
        ('exclude = ["../vendor"]', "exclude", "reaches outside the configuration's directory"),
        ('allow = ["/abs/path"]', "allow", "reaches outside"),
    ],
)
def test_bad_policy_values_name_the_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    """Typos in allow-apis, unknown codes and escaping globs are refused clearly."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.patchscope.lint]\n{text}\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value).startswith(
        f"{tmp_path / 'pyproject.toml'}: [tool.patchscope.lint] {key}: "
    )
    assert fragment in str(info.value)


def test_setup_cfg_per_file_line_without_a_colon_is_an_error(tmp_path: Path) -> None:
    """setup.cfg per-file-ignores lines must read ``glob: CODE, ...``."""
    (tmp_path / "setup.cfg").write_text("[tool:patchscope.lint]\nper-file-ignores =\n    tests\n")
    with pytest.raises(ConfigError, match=re.escape("expected lines of 'glob: CODE, ...'")):
        load_config(tmp_path)


def test_read_config_takes_a_file_anywhere(tmp_path: Path) -> None:
    """--config's file is read whatever its directory, and roots the globs there."""
    (tmp_path / "ci").mkdir()
    path = tmp_path / "ci" / "lint.toml"
    path.write_text('[tool.patchscope.lint]\nignore = ["PS004"]\n')
    config = read_config(path)
    assert (config.ignore, config.root, config.source) == (
        ("PS004",),
        str(tmp_path / "ci"),
        str(path),
    )


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("missing.toml", None, "no such file"),
        ("lint.yaml", "x: 1\n", "not a configuration file"),
        (
            "pyproject.toml",
            "[tool.ruff]\nline-length = 1\n",
            "has no [tool.patchscope.lint] section",
        ),
        ("setup.cfg", "[metadata]\nname = x\n", "has no [tool:patchscope.lint] section"),
    ],
)
def test_read_config_errors(tmp_path: Path, name: str, text: str | None, fragment: str) -> None:
    """A --config file that cannot supply settings says why and what to pass instead."""
    if text is not None:
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        read_config(tmp_path / name)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        (
            "pyproject.toml",
            '[tool.patchscope.lint]\npatch-targets = ["mypkg.*", "torch.cuda.*"]\n'
            'skip-annotations = true\nextend-suppression-comments = ["#ignore-cuda"]\n',
        ),
        (
            "setup.cfg",
            "[tool:patchscope.lint]\npatch-targets = mypkg.*, torch.cuda.*\n"
            "skip-annotations = yes\nextend-suppression-comments = ignore-cuda\n",
        ),
    ],
)
def test_policy_keys(tmp_path: Path, name: str, text: str) -> None:
    """patch-targets, skip-annotations and extend-suppression-comments read alike."""
    (tmp_path / name).write_text(text)
    config = load_config(tmp_path)
    assert config.patch_targets == ("mypkg.*", "torch.cuda.*")
    assert config.skip_annotations is True
    assert config.extend_suppression_comments == ("ignore-cuda",)
    rules = config.rules()
    assert rules.patched("mypkg.sub") and not rules.patched("other")


def test_policy_defaults(tmp_path: Path) -> None:
    """By default torch.cuda is the patch target, annotations are checked, no markers."""
    config = load_config(tmp_path)
    assert config.patch_targets == ("torch.cuda.*",)
    assert config.skip_annotations is False
    assert config.extend_suppression_comments == ()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('patch-targets = ["my pkg"]', "'my pkg' is not a module name"),
        ('patch-targets = ["mypkg.**"]', "'mypkg.**' is not a module name"),
        ('skip-annotations = "yes"', "skip-annotations: expected true or false, got 'yes'"),
        ('extend-suppression-comments = ["no cuda"]', "'no cuda' is not a comment marker"),
        ('extend-suppression-comments = ["patchscope: ignore"]', "is not a comment marker"),
    ],
)
def test_bad_policy_keys_name_the_key(tmp_path: Path, text: str, fragment: str) -> None:
    """A bad value of a policy key is a ConfigError naming the key and the fix."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.patchscope.lint]\n{text}\n")
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        load_config(tmp_path)


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        (
            "pyproject.toml",
            '[tool.patchscope.lnt]\nselect = ["PS001"]\n',
            "unknown section [tool.patchscope.lnt]; did you mean [tool.patchscope.lint]?",
        ),
        (
            "pyproject.toml",
            '[tool.patchscope.select]\nx = ["PS001"]\n',
            "'select' is a key: put it under [tool.patchscope.lint]",
        ),
        (
            "setup.cfg",
            "[tool:patchscope.lnit]\nselect = PS001\n",
            "unknown section [tool:patchscope.lnit]; did you mean [tool:patchscope.lint]?",
        ),
    ],
)
def test_misspelled_section_is_an_error(
    tmp_path: Path, name: str, text: str, fragment: str
) -> None:
    """An unknown tool.patchscope.* section is a ConfigError with a suggestion."""
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        load_config(tmp_path)
