"""The documentation matches the code: its examples run, and every public name is in it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import patchscope
import patchscope.lint
import patchscope.testing
from patchscope.lint import main
from patchscope.lint._config import KEYS
from patchscope.lint._rules import SUMMARIES

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
# The package under test, which need not be the checkout's (an installed wheel).
PACKAGE = Path(patchscope.__file__).parent

pytest_plugins = ["pytester"]

#: Pages whose every ```python block is an example the suite runs.
RUNNABLE_PAGES = ["migration.md", "concepts/choosing-a-scope.md"]


def _page(name: str) -> str:
    return (DOCS / name).read_text()


def test_lint_page_example_run_matches_the_lint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Running the lint page's example.py prints the page's output and exit status."""
    section = _page("lint.md").split("## Example", 1)[1]
    source = re.search(r"```python\n(.*?)```", section, re.S)
    console = re.search(
        r"\$ patchscope lint --statistics example.py\n(.*?)\$ echo \$\?\n(\d+)\n", section, re.S
    )
    assert source is not None and console is not None
    (tmp_path / "example.py").write_text(source.group(1))
    monkeypatch.chdir(tmp_path)
    assert main(["--statistics", "example.py"]) == int(console.group(2))
    assert capsys.readouterr().out == console.group(1)


def test_readme_lint_excerpt_is_the_lint_pages_output() -> None:
    """The README's shortened lint output is the start of the lint page's full output."""
    readme = (ROOT / "README.md").read_text()
    command = r"\$ patchscope lint --statistics example.py\n"
    excerpt = re.search(command + r"(.*?)\.\.\.\n", readme, re.S)
    full = re.search(command + r"(.*?)\$ echo", _page("lint.md"), re.S)
    assert excerpt is not None and full is not None
    assert full.group(1).startswith(excerpt.group(1))


def _torch_all() -> list[str]:
    # Read patchscope.torch's __all__ without importing torch.
    tree = ast.parse((PACKAGE / "torch" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__":
            return list(ast.literal_eval(node.value))
    raise AssertionError("patchscope/torch/__init__.py has no __all__")


@pytest.mark.parametrize(
    ("module", "names", "page"),
    [
        ("patchscope", patchscope.__all__, "api/patchscope.md"),
        ("patchscope.torch", _torch_all(), "api/torch.md"),
        ("patchscope.testing", patchscope.testing.__all__, "api/testing.md"),
        ("patchscope.lint", patchscope.lint.__all__, "api/lint.md"),
    ],
    ids=["patchscope", "torch", "testing", "lint"],
)
def test_api_reference_documents_every_public_name(
    module: str, names: list[str], page: str
) -> None:
    """Every name in a public module's __all__ has an entry in the API reference."""
    text = _page(page)
    missing = [name for name in names if not re.search(rf":: {re.escape(module)}\.{name}\b", text)]
    assert missing == []


def test_plugin_page_documents_every_option_fixture_and_marker() -> None:
    """The plugin's command-line option, ini settings, fixtures and marker are on its page."""
    text = _page("api/pytest-plugin.md")
    # The options and ini settings are declared beside the plugin, so that
    # they stay registered under -p no:patchscope.
    plugin = (PACKAGE / "pytest_plugin.py").read_text()
    plugin += (PACKAGE / "testing" / "_pytest_options.py").read_text()
    options = re.findall(r'addoption\(\s*"(--[\w-]+)"', plugin)
    inis = re.findall(r'addini\(\s*"(\w+)"', plugin)
    fixtures = re.findall(r"@pytest\.fixture(?:\(.*?\))?\ndef (\w+)\(", plugin)
    assert options and inis and fixtures
    missing = [f"`{n}" for n in [*options, *inis, *fixtures] if f"`{n}" not in text]
    assert missing == []
    assert "@pytest.mark.patchscope(leaks=" in text


def test_lint_page_documents_every_rule_and_setting() -> None:
    """Every code the lint reports and every configuration key has a row on the lint page."""
    text = _page("lint.md")
    assert [code for code in SUMMARIES if f"| {code} |" not in text] == []
    assert [key for key in KEYS if f"| `{key}` |" not in text] == []


def _examples(page: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", _page(page), re.S | re.M)


def _example_params(test_files: bool) -> list[pytest.param]:  # type: ignore[valid-type]
    """One param per block of the runnable pages: test files (``def test_``) or scripts."""
    params = []
    for page in RUNNABLE_PAGES:
        for number, code in enumerate(_examples(page), 1):
            if ("\ndef test_" in f"\n{code}") is test_files:
                params.append(pytest.param(code, id=f"{page}-{number}"))
    return params


def test_runnable_pages_have_examples() -> None:
    """Each runnable page holds examples of both kinds the suite runs (a guard on the regex)."""
    assert all(_examples(page) for page in RUNNABLE_PAGES)
    assert _example_params(test_files=False) and _example_params(test_files=True)


@pytest.mark.parametrize("code", _example_params(test_files=False))
def test_page_example_runs(code: str) -> None:
    """A script example of the docs runs to its end (its asserts hold) and leaves nothing live."""
    exec(compile(code, "<docs example>", "exec"), {"__name__": "docs_example"})
    assert patchscope.active() == ()


@pytest.mark.parametrize("code", _example_params(test_files=True))
def test_page_test_file_example_passes(code: str, pytester: pytest.Pytester) -> None:
    """A test-file example of the docs passes under pytest with the plugin, every test in it."""
    pytester.makepyfile(test_example=code)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(re.findall(r"^def test_", code, re.M)))
    assert patchscope.active() == ()


def _sphinx_options(command: str) -> list[str]:
    """The options and source directory of a ``python -m sphinx`` command (no output dir)."""
    words = command.replace("\\\n", " ").split()
    start = words.index("sphinx") + 1
    return words[start:-1]


def test_read_the_docs_builds_as_ci_does() -> None:
    """.readthedocs.yaml installs with the constraints and runs the docs build of .ci/run."""
    rtd, ci = ROOT / ".readthedocs.yaml", ROOT / ".ci" / "run"
    if not rtd.exists() or not ci.exists():
        pytest.skip("an installed copy without the repository's build files")
    config, script = rtd.read_text(), ci.read_text()
    ci_build = re.search(r"-m sphinx (.*?docs-html\")", script, re.S)
    rtd_build = re.search(r"- python -m sphinx (.*)", config)
    assert ci_build is not None and rtd_build is not None
    assert _sphinx_options("sphinx " + rtd_build.group(1)) == _sphinx_options(
        "sphinx " + ci_build.group(1)
    )
    assert "pip install -q -c constraints.txt -e '.[docs]'" in config
    assert "pip install -q -c constraints.txt -e '.[docs]'" in script
    assert 'python: "3.11"' in config and "docs_version=3.11" in script


def test_readme_and_changelog_links_are_absolute() -> None:
    """Links in README.md and CHANGELOG.md work on the package index's page (no relative paths)."""
    pages = [ROOT / name for name in ("README.md", "CHANGELOG.md") if (ROOT / name).exists()]
    if not pages:
        pytest.skip("an installed copy without the repository's README and changelog")
    for page in pages:
        links = re.findall(r"\]\(([^)]*)\)", page.read_text())
        assert links
        assert [link for link in links if not link.startswith("https://")] == []


def test_project_urls_point_at_the_repository_and_the_docs() -> None:
    """setup.cfg's project_urls name the repository and the hosted docs the README links to."""
    setup = (ROOT / "setup.cfg").read_text()
    readme = (ROOT / "README.md").read_text()
    for url in ("https://github.com/patchscope/patchscope", "https://patchscope.readthedocs.io/"):
        assert url in setup and url in readme
    assert "project_urls =" in setup
