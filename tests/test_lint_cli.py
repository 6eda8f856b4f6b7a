"""Tests for patchscope.lint._cli and patchscope.__main__: output, JSON, exit codes."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from patchscope.__main__ import main as patchscope_main
from patchscope.lint import main
from patchscope.lint._rules import CODES

DIRTY = "import torch\n\ntorch.cuda.synchronize()\ntorch.cuda.Event()\ntorch.cuda.empty_cache()\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with one clean, one dirty and one broken file."""
    (tmp_path / "clean.py").write_text('"""Uses torch.cuda.Event() only in prose."""\n')
    (tmp_path / "dirty.py").write_text(DIRTY)
    (tmp_path / "broken.py").write_text("def f(:  # torch.cuda\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m patchscope ARGS`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "patchscope", *args], capture_output=True, text=True, check=False
    )


def test_clean_file_exits_0_and_prints_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit status 0 and no output when nothing is found."""
    assert main(["clean.py"]) == 0
    assert capsys.readouterr() == ("", "")


def test_findings_exit_1_in_flake8_format(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each finding is one ``path:line:col: CODE message`` line; exit status 1."""
    assert main(["dirty.py"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ", 2)[:2] for line in out] == [
        ["dirty.py:3:1:", "PS001"],
        ["dirty.py:4:1:", "PS001"],
        ["dirty.py:5:1:", "PS002"],
    ]
    assert all(re.fullmatch(r"[^:]+:\d+:\d+: PS\d{3} .+", line) for line in out)


def test_syntax_error_is_reported_and_the_run_goes_on(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file that does not parse is a PS000 finding; other files are still checked."""
    assert main([]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("broken.py:1:7: PS000 syntax error: ")
    assert [line.split(":")[0] for line in out] == ["broken.py"] + ["dirty.py"] * 3


def test_statistics(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--statistics appends one ``count CODE summary`` line per code."""
    assert main(["--statistics", "."]) == 1
    tail = capsys.readouterr().out.splitlines()[-3:]
    assert tail == [
        "1     PS000 file could not be parsed",
        "2     PS001 torch.cuda events and streams",
        "1     PS002 torch.cuda memory management",
    ]


def test_json_schema(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--format json prints one document with versioned, typed fields."""
    assert main(["--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert set(document) == {"version", "files_checked", "findings", "statistics"}
    assert document["version"] == 1
    assert document["files_checked"] == 3
    assert document["statistics"] == {"PS000": 1, "PS001": 2, "PS002": 1}
    first, second = document["findings"][:2]
    assert first == {
        "path": "broken.py",
        "line": 1,
        "column": 7,
        "end_line": first["end_line"],
        "end_column": first["end_column"],
        "code": "PS000",
        "api": None,
        "message": first["message"],
    }
    assert second == {
        "path": "dirty.py",
        "line": 3,
        "column": 1,
        "end_line": 3,
        "end_column": 23,
        "code": "PS001",
        "api": "torch.cuda.synchronize",
        "message": "torch.cuda.synchronize is CUDA-only; use torch.accelerator.synchronize()",
    }
    for finding in document["findings"]:
        assert all(
            isinstance(finding[k], int) for k in ("line", "column", "end_line", "end_column")
        )


def test_json_when_clean(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A clean run still prints a complete JSON document, and exits 0."""
    assert main(["--format=json", "clean.py"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "version": 1,
        "files_checked": 1,
        "findings": [],
        "statistics": {},
    }


@pytest.mark.parametrize(
    "args",
    [
        ["--format", "xml"],
        ["--output-format", "sarif"],
        ["--jobs", "0"],
        ["--no-such-option"],
    ],
)
def test_usage_errors_exit_2(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """Bad options exit 2 with the reason on stderr."""
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error" in captured.err


def test_missing_path_is_reported_and_the_rest_linted(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path that does not exist is a PS000 finding; the other paths are still linted."""
    assert main(["missing.py", "dirty.py"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "missing.py:1:1: PS000 no such file or directory; check the path"
    assert [line.split(" ", 2)[1] for line in out[:-1]] == ["PS001", "PS001", "PS002"]


def test_config_error_exits_2_naming_file_and_key(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad setting exits 2 and names the file and the key."""
    (project / "setup.cfg").write_text("[tool:patchscope.lint]\nselect = PS042\n")
    assert main(["dirty.py"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("patchscope lint: error: ")
    assert f"{project / 'setup.cfg'}: [tool:patchscope.lint] select: unknown code 'PS042'" in err


def test_config_select_ignore_and_allow_apply(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Settings from pyproject.toml filter codes and allow files."""
    (project / "pyproject.toml").write_text(
        '[tool.patchscope.lint]\nignore = ["PS002"]\nallow = ["allowed.py"]\n'
    )
    (project / "allowed.py").write_text(DIRTY)
    assert main(["dirty.py", "allowed.py"]) == 1
    assert [line.split(": ")[1][:5] for line in capsys.readouterr().out.splitlines()] == [
        "PS001",
        "PS001",
    ]


def test_help_lists_the_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """``patchscope lint --help`` exits 0 and documents every code."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for code in CODES:
        assert code in out


def test_python_dash_m_runs_the_lint(project: Path) -> None:
    """``python -m patchscope lint`` prints the same as the in-process CLI."""
    result = run("lint", "dirty.py")
    assert result.returncode == 1
    assert result.stdout.startswith("dirty.py:3:1: PS001 torch.cuda.synchronize is CUDA-only")
    assert len(result.stdout.splitlines()) == 3


def test_console_script_is_installed(project: Path) -> None:
    """The ``patchscope`` script from setup.cfg's entry points runs the lint."""
    script = Path(sys.executable).parent / ("patchscope.exe" if os.name == "nt" else "patchscope")
    if not script.exists():
        pytest.skip("patchscope is not installed as a script in this environment")
    result = subprocess.run(
        [str(script), "lint", "dirty.py"], capture_output=True, text=True, check=False
    )
    assert (result.returncode, len(result.stdout.splitlines())) == (1, 3)


@pytest.mark.parametrize(
    ("args", "status", "stream"),
    [([], 2, "err"), (["--help"], 0, "out"), (["frobnicate"], 2, "err")],
)
def test_subcommand_dispatch(
    capsys: pytest.CaptureFixture[str], args: list[str], status: int, stream: str
) -> None:
    """``patchscope`` without a known subcommand prints the subcommand table."""
    assert patchscope_main(args) == status
    captured = capsys.readouterr()
    assert "lint" in getattr(captured, stream)


def test_import_patchscope_does_not_import_the_lint_and_the_lint_not_torch(
    project: Path,
) -> None:
    """The lint is lazy, and linting never imports torch."""
    code = (
        "import sys, patchscope\n"
        "assert 'patchscope.lint' not in sys.modules\n"
        "from patchscope.lint import lint_paths\n"
        "assert lint_paths(['dirty.py']).findings\n"
        "assert 'torch' not in sys.modules, 'the lint imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_github_output_format(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--output-format github prints one ::error workflow command per finding."""
    assert main(["--output-format", "github", "dirty.py"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        "::error file=dirty.py,line=3,col=1,endLine=3,endColumn=23,title=PS001::"
        "PS001 torch.cuda.synchronize is CUDA-only; use torch.accelerator.synchronize()"
    )


def test_github_output_escapes_what_the_runner_would_split(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Commas and colons in a file name are escaped; each finding stays one line."""
    (project / "a,b:c.py").write_text("def f(:  # torch.cuda\n")
    assert main(["--output-format=github", "a,b:c.py"]) == 1
    line = capsys.readouterr().out
    assert line.startswith("::error file=a%2Cb%3Ac.py,line=1,")
    assert line.count("\n") == 1


def test_stdin_with_a_filename_uses_that_files_settings(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-`` reads stdin; --stdin-filename names it and picks its settings."""
    (project / "sub").mkdir()
    (project / "sub" / "setup.cfg").write_text("[tool:patchscope.lint]\nignore = PS002\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(DIRTY.encode())))
    assert main(["-", "--stdin-filename", "sub/buffer.py"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[:2] for line in out] == [
        ["sub/buffer.py:3:1:", "PS001"],
        ["sub/buffer.py:4:1:", "PS001"],
    ]
    assert not (project / "sub" / "buffer.py").exists()


def test_stdin_without_a_filename_is_named_dash(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Findings read from stdin without a name are reported for ``-``."""
    monkeypatch.setattr(
        sys, "stdin", io.TextIOWrapper(io.BytesIO(b"import torch\ntorch.cuda.graph\n"))
    )
    assert main(["-"]) == 1
    assert capsys.readouterr().out.startswith("-:2:1: PS006 ")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["-", "dirty.py"], "'-' (stdin) cannot be combined with other paths"),
        (["--stdin-filename", "x.py", "dirty.py"], "--stdin-filename goes with '-'"),
        (["--config", "nowhere.toml", "dirty.py"], "nowhere.toml: no such file"),
    ],
)
def test_stdin_and_config_usage_errors(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], fragment: str
) -> None:
    """Misused stdin options and a missing --config file exit 2 and say why."""
    assert main(args) == 2
    assert fragment in capsys.readouterr().err


def test_config_option_overrides_discovery(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--config FILE applies to every file, whatever configuration is nearer."""
    (project / "pyproject.toml").write_text('[tool.patchscope.lint]\nignore = ["PS002"]\n')
    (project / "ci").mkdir()
    (project / "ci" / "strict.cfg").write_text("[tool:patchscope.lint]\nselect = PS002\n")
    assert main(["--no-cache", "--config", "ci/strict.cfg", "dirty.py"]) == 1
    assert [line.split(" ")[1] for line in capsys.readouterr().out.splitlines()] == ["PS002"]


def test_report_unused_suppressions(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unused suppressions are PS008 only with --report-unused-suppressions."""
    (project / "s.py").write_text("x = 1  # patchscope: ignore[PS001]\n")
    assert main(["s.py"]) == 0
    assert main(["--report-unused-suppressions", "s.py"]) == 1
    assert capsys.readouterr().out.startswith("s.py:1:8: PS008 PS001 in ")


def test_findings_are_the_same_cold_and_warm(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second run, from the cache, prints exactly what the first printed."""
    assert main(["."]) == 1
    cold = capsys.readouterr().out
    assert (project / ".patchscope_cache").is_dir()
    assert main(["."]) == 1
    assert capsys.readouterr().out == cold


def test_diff_prints_the_fix_and_changes_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--diff shows the safe rewrites, exits 1, and leaves the file as it was."""
    assert main(["--diff", "dirty.py"]) == 1
    out = capsys.readouterr().out
    assert "-torch.cuda.synchronize()\n+torch.accelerator.synchronize()\n" in out
    assert "+torch.accelerator.empty_cache()" in out
    assert (project / "dirty.py").read_text() == DIRTY


def test_fix_rewrites_and_reports_what_is_left(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--fix writes the safe rewrites, says how many, and reports the rest."""
    assert main(["--fix", "dirty.py"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "patchscope lint: fixed 2 findings in 1 file\n"
    assert [line.split(" ", 2)[:2] for line in captured.out.splitlines()] == [
        ["dirty.py:4:1:", "PS001"]
    ]
    assert (project / "dirty.py").read_text() == (
        "import torch\n\ntorch.accelerator.synchronize()\ntorch.cuda.Event()\n"
        "torch.accelerator.empty_cache()\n"
    )
    assert main(["--diff", "dirty.py"]) == 0


def test_fix_refuses_stdin(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--fix has nothing to write with '-'; it is a usage error."""
    assert main(["--fix", "-"]) == 2
    assert "do not read stdin" in capsys.readouterr().err


def test_lint_command_imports_neither_the_core_nor_wrapt_nor_asyncio(tmp_path: Path) -> None:
    """``patchscope lint`` starts without importing the patching core, wrapt or asyncio."""
    (tmp_path / "a.py").write_text(DIRTY)
    code = (
        "import sys, runpy\n"
        f"sys.argv = ['patchscope', 'lint', '--no-cache', {str(tmp_path / 'a.py')!r}]\n"
        "try:\n"
        "    runpy.run_module('patchscope', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "core = ('patchscope._redirect', 'patchscope._registry', 'patchscope._accel')\n"
        "bad = sorted(m for m in sys.modules\n"
        "             if m.split('.')[0] in ('wrapt', 'asyncio') or m in core)\n"
        "print('IMPORTED', bad)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.splitlines()[-1] == "IMPORTED []", done.stderr
    assert "PS001" in done.stdout
