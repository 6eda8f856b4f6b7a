"""Mutation testing of the core's Python modules, run in pure Python.

Makes small changes ("mutants") to the core's Python modules, one at a time,
and runs the tests against each: a mutant the tests fail on is killed, one
they pass on survived, and each survivor is either equivalent to the original
or a behaviour no test checks.

    python scripts/mutate.py                        # every core module
    python scripts/mutate.py --module _resolve.py   # one (repeat for more)
    python scripts/mutate.py --sample 150 --seed 1  # a quick estimate
    python scripts/mutate.py --list                 # print the mutants only
    python scripts/mutate.py --rerun results.json   # an earlier run's survivors again

The mutations: comparison flips (``==``/``!=``, ``is``/``is not``,
``in``/``not in``, ``<``/``<=``, ``>``/``>=``), ``and``/``or``, ``not``
removed, constants (``True``/``False``, ``0``/``1``, other ints + 1,
``None`` to a fresh ``object()``), a simple statement replaced by ``pass``,
``return X`` to ``return None``, ``break``/``continue``, and ``+``/``-``.
Docstrings, annotations, f-strings, ``if TYPE_CHECKING:`` blocks and the
bodies of ``__repr__`` methods are left alone; a mutant that does not compile
is not counted.

How it runs: the project (without its virtual environment and caches) is
copied to a temporary directory, once per job; the real tree is never written,
so an interrupted run leaves it as it was (and reports the mutants it
finished). The suite runs once in the first copy under ``coverage``, one
context per test, to learn which tests execute each line of the mutated
modules. Each mutant is then written into a copy and
only those tests run against it (``-x``, fastest first), with the copy first
on ``PYTHONPATH`` and ``PATCHSCOPE_PURE_PYTHON=1``; a check in the test run
refuses to go on unless the package is imported from the copy. Each copy has
a server process that has imported pytest, its plugins and the heavy
third-party packages (never the package under test), and each test run is a
fork of it: a mutant costs its tests, not an interpreter's start. The server
first collects the suite once, writing the unmutated modules' bytecode, and
then runs it unmutated: a test that fails in a server is left out (a server
is not a fresh interpreter), and the times measured there set the timeouts.
A test run writes no bytecode, and a mutated module never has the mtime its cached
bytecode records, so it is always compiled from its mutated source. A line that
runs only at import is tested by the tests of its enclosing function or class
and by the tests of what the modules define (``IMPORT_TIME_TESTS``), and at
module level by the whole suite. A mutant whose line no test executes
is a survivor. A mutant that runs past its timeout (20 s plus three times its
tests' time unmutated) counts as killed: a hang is a failure the
suite notices. Tests that fail before any mutation are left out of every run.

The suite runs on every supported CPython, and some lines run only on some
(version-gated code). ``--also PYTHON`` (repeatable) runs what survived the
first interpreter again on another one, in pure Python too: its module's test
file and the tests that ran its line, or every test where none ran its line
on the first. One it kills there counts as killed,
and the report says on which interpreter; the tests it will run must pass
there unmutated first, or no mutant runs on it.

Needs ``coverage`` (``pip install coverage``). The score, the survivors
(file:line, the mutation, the line before and after) and a JSON file of every
result are written at the end.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import queue
import random
import select as _select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE_MODULES = (
    "_resolve.py",
    "_entry.py",
    "_registry.py",
    "_handles.py",
    "_pairing.py",
    "_redirect.py",
    "_group.py",
    "_during.py",
    "_construct.py",
    "_call.py",
    "_prologue.py",
    "_decorate.py",
    "_slots.py",
    "_cpython.py",
    "_accel.py",
    "_errors.py",
)
#: Tests that check what the modules define (the shape of their classes) rather than
#: run it: they run too for a mutant on a line that runs only at import.
IMPORT_TIME_TESTS = ("tests/test_footprint.py",)
#: Top-level entries of the project that are not copied.
_SKIP_TOP = {
    ".git",
    ".cache",
    ".venv",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    "build",
    "dist",
    ".patchscope_cache",
}
#: The pytest plugin written into each copy (imported as ``-p _mutate_plugin``).
_PLUGIN = """
import importlib.util, json, os, sys, time
import pytest

_PKG = os.environ["MUTATE_PACKAGE"]
_COPY = os.path.realpath(os.environ["MUTATE_COPY"]) + os.sep
_REPORT = os.environ.get("MUTATE_REPORT")
_durations = {}
_failed = set()


def pytest_configure(config):
    mod = sys.modules.get(_PKG)
    origin = getattr(mod, "__file__", None) if mod else importlib.util.find_spec(_PKG).origin
    if not os.path.realpath(origin or "").startswith(_COPY):
        print(f"MUTATE-WRONG-PACKAGE {_PKG} from {origin}, not from {_COPY}", flush=True)
        pytest.exit("the package under test is not the mutated copy", returncode=99)


if _REPORT:
    try:
        import coverage
    except ImportError:  # a run that only times the tests
        coverage = None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        cov = coverage.Coverage.current() if coverage is not None else None
        if cov is not None:
            cov.switch_context(item.nodeid)
        start = time.perf_counter()
        yield
        _durations[item.nodeid] = time.perf_counter() - start
        if cov is not None:
            cov.switch_context("")

    def pytest_runtest_logreport(report):
        if report.failed:
            _failed.add(report.nodeid)

    def pytest_sessionfinish(session):
        with open(_REPORT, "w") as f:
            json.dump({"durations": _durations, "failed": sorted(_failed)}, f)
"""
#: The fork server written into each copy (run as ``python _mutate_server.py``).
#: One request a line on stdin, ``{"args": [...], "out": path}``; it answers
#: ``{"pid": n}`` when the run starts and ``{"rc": n}`` when it ends (a signal
#: that ended it as its negative number).
_SERVER = """
import importlib, importlib.metadata, json, os, sys


def _warm(package):
    for name in ("pytest", "_pytest.python", "_pytest.assertion.rewrite", "_pytest.fixtures",
                 "hypothesis", "hypothesis.stateful", "wrapt", "numpy", "torch"):
        try:
            importlib.import_module(name)
        except Exception:
            pass
    for ep in importlib.metadata.entry_points(group="pytest11"):
        if ep.value.split(".")[0].split(":")[0] != package:
            try:
                importlib.import_module(ep.value.split(":")[0])
            except Exception:
                pass
    # pytest warns that a plugin imported before it cannot have its asserts
    # rewritten, in every session (pytester's too): not for what was imported here.
    try:
        from _pytest.assertion.rewrite import AssertionRewritingHook
    except ImportError:
        return
    warm = frozenset(sys.modules)
    warn = AssertionRewritingHook._warn_already_imported

    def _warn_already_imported(self, name):
        if name not in warm:
            warn(self, name)

    AssertionRewritingHook._warn_already_imported = _warn_already_imported


def _answer(**reply):
    sys.stdout.write(json.dumps(reply) + "\\n")
    sys.stdout.flush()


def _serve(package):
    _warm(package)
    if package in sys.modules or any(m.startswith(package + ".") for m in sys.modules):
        _answer(error=f"{package} was imported before any mutant")
        sys.exit(3)
    import pytest

    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            rc = 70
            try:
                os.setsid()
                fd = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.close(fd)
                os.environ.update(request.get("env", {}))
                sys.dont_write_bytecode = os.environ.get("PYTHONDONTWRITEBYTECODE") == "1"
                rc = int(pytest.main(request["args"]))
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(rc)
        _answer(pid=pid)
        status = os.waitpid(pid, 0)[1]
        _answer(rc=os.waitstatus_to_exitcode(status))


# A process the tests start with multiprocessing's spawn imports this file as
# __mp_main__: it must not serve.
if __name__ == "__main__":
    _serve(os.environ["MUTATE_PACKAGE"])
"""

_FLIP = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
_SYMBOL = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.And: "and",
    ast.Or: "or",
    ast.Add: "+",
    ast.Sub: "-",
}
#: Simple statements that "replace with pass" applies to (imports, pass,
#: global/nonlocal, return, break and continue are left to their own operators).
_DELETABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Assert, ast.Delete)


@dataclass
class Mutant:
    module: str
    lineno: int
    end_lineno: int
    operator: str
    description: str
    original: str
    mutated: str
    #: the first line of the statement the change is in (what coverage records)
    stmt_line: int
    #: enclosing functions and classes, innermost first, as (first, last) lines
    scopes: list[tuple[int, int]] = field(default_factory=list)
    source: str = field(default="", repr=False)
    status: str = ""
    seconds: float = 0.0
    tests: int = 0
    #: the ``--also`` interpreter that killed it, if the first one did not
    python: str = ""

    @property
    def where(self) -> str:
        return f"{self.module}:{self.lineno}"

    def as_json(self) -> dict[str, object]:
        return {k: v for k, v in vars(self).items() if k not in ("source", "scopes")}


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
    )


def _expr(node: ast.AST) -> str:
    return "(" + ast.unparse(node) + ")"


def _candidates(node: ast.AST) -> list[tuple[str, str, str]]:
    """(operator, description, replacement source) for each mutation of *node* itself."""
    out: list[tuple[str, str, str]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _FLIP:
                new = copy.deepcopy(node)
                new.ops[i] = _FLIP[type(op)]()
                out.append(
                    (
                        "compare",
                        f"`{_SYMBOL[type(op)]}` -> `{_SYMBOL[_FLIP[type(op)]]}`",
                        _expr(new),
                    )
                )
    elif isinstance(node, ast.BoolOp):
        bool_new = copy.deepcopy(node)
        bool_new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append(
            (
                "boolop",
                f"`{_SYMBOL[type(node.op)]}` -> `{_SYMBOL[type(bool_new.op)]}`",
                _expr(bool_new),
            )
        )
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("not", "`not` removed", _expr(node.operand)))
    elif isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool):
            out.append(("constant", f"`{value}` -> `{not value}`", f"({not value})"))
        elif isinstance(value, int):
            new_value = {0: 1, 1: 0}.get(value, value + 1)
            out.append(("constant", f"`{value}` -> `{new_value}`", f"({new_value})"))
        elif value is None:
            out.append(("constant", "`None` -> `object()`", "(object())"))
    elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        if not (_is_str(node.left) or _is_str(node.right)):
            bin_new = copy.deepcopy(node)
            bin_new.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
            out.append(
                (
                    "arith",
                    f"`{_SYMBOL[type(node.op)]}` -> `{_SYMBOL[type(bin_new.op)]}`",
                    _expr(bin_new),
                )
            )
    elif isinstance(node, ast.Return):
        if node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            out.append(("return", "`return X` -> `return None`", "return None"))
    elif isinstance(node, ast.Break):
        out.append(("loop", "`break` -> `continue`", "continue"))
    elif isinstance(node, ast.Continue):
        out.append(("loop", "`continue` -> `break`", "break"))
    if isinstance(node, ast.AugAssign) and isinstance(node.op, (ast.Add, ast.Sub)):
        aug_new = copy.deepcopy(node)
        aug_new.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        out.append(
            (
                "arith",
                f"`{_SYMBOL[type(node.op)]}=` -> `{_SYMBOL[type(aug_new.op)]}=`",
                ast.unparse(aug_new),
            )
        )
    bare = (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
        isinstance(node, ast.AnnAssign) and node.value is None
    )
    if isinstance(node, _DELETABLE) and not bare:
        out.append(("delete", "statement replaced by `pass`", "pass"))
    return out


def mutants_of(module: str, source: str) -> tuple[list[Mutant], int]:
    """Every mutant of *source*, and how many candidates did not compile."""
    tree = ast.parse(source)
    raw = source.encode()
    lines = raw.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    text_lines = source.splitlines()
    found: list[Mutant] = []
    seen = {source}
    broken = 0

    def emit(node: ast.AST, stmt_line: int, scopes: list[tuple[int, int]]) -> None:
        nonlocal broken
        for operator, description, replacement in _candidates(node):
            begin = starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
            end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
            mutated = (raw[:begin] + replacement.encode() + raw[end:]).decode()
            if mutated in seen:
                continue
            seen.add(mutated)
            try:
                compile(mutated, module, "exec")
            except SyntaxError:
                broken += 1
                continue
            found.append(
                Mutant(
                    module=module,
                    lineno=node.lineno,  # type: ignore[attr-defined]
                    end_lineno=node.end_lineno,  # type: ignore[attr-defined]
                    operator=operator,
                    description=description,
                    original=text_lines[node.lineno - 1].strip(),  # type: ignore[attr-defined]
                    mutated=mutated.splitlines()[node.lineno - 1].strip(),  # type: ignore[attr-defined]
                    stmt_line=stmt_line,
                    scopes=scopes,
                    source=mutated,
                )
            )

    def body(stmts: list[ast.stmt]) -> list[ast.stmt]:
        return stmts[1:] if stmts and _is_docstring(stmts[0]) else stmts

    def visit(node: ast.AST, stmt_line: int, scopes: list[tuple[int, int]]) -> None:
        if isinstance(node, ast.JoinedStr):
            return  # f-strings: their inner offsets are unreliable before 3.12
        if isinstance(node, ast.stmt):
            stmt_line = node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            scopes = [(first, node.end_lineno or node.lineno), *scopes]
            children: list[ast.AST] = list(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                children += [*node.bases, *node.keywords]
            else:
                if node.name == "__repr__":
                    return  # how an object prints is no behaviour of the core
                children += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            for child in [*children, *body(node.body)]:
                visit(child, stmt_line, scopes)
            return
        if isinstance(node, ast.Module):
            for child in body(node.body):
                visit(child, stmt_line, scopes)
            return
        if _is_type_checking(node):
            for child in node.orelse:  # type: ignore[attr-defined]
                visit(child, stmt_line, scopes)
            return
        if isinstance(node, ast.arguments):  # a lambda's: defaults only, no annotations
            for child in [*node.defaults, *(d for d in node.kw_defaults if d)]:
                visit(child, stmt_line, scopes)
            return
        if isinstance(node, ast.Expr) and _is_str(node.value):
            return  # a string as a statement is a comment
        emit(node, stmt_line, scopes)
        if isinstance(node, ast.AnnAssign):
            children = [node.value] if node.value else []
        else:
            children = list(ast.iter_child_nodes(node))
        for child in children:
            visit(child, stmt_line, scopes)

    visit(tree, 0, [])
    return found, broken


# --- running -----------------------------------------------------------------


def _copy_project(root: Path, into: Path) -> Path:
    def ignore(folder: str, names: list[str]) -> set[str]:
        skipped = {n for n in names if n == "__pycache__"}
        if Path(folder) == root:
            skipped |= {n for n in names if n in _SKIP_TOP or n.startswith(".venv")}
        return skipped

    shutil.copytree(root, into, ignore=ignore, symlinks=True)
    (into / "_mutate_plugin.py").write_text(_PLUGIN)
    (into / "_mutate_server.py").write_text(_SERVER)
    return into


def _env(copy_dir: Path, package: str, report: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PATCHSCOPE_PURE_PYTHON="1",
        PYTHONDONTWRITEBYTECODE="1",
        MUTATE_PACKAGE=package,
        MUTATE_COPY=str(copy_dir),
    )
    env["PYTHONPATH"] = os.pathsep.join([str(copy_dir), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("MUTATE_REPORT", None)
    if report is not None:
        env["MUTATE_REPORT"] = str(report)
    return env


_live: set[int] = set()
_live_lock = threading.Lock()


def _run(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float | None,
) -> tuple[int | None, str]:
    """Run *cmd* in its own process group; (None, output) when it ran past *timeout*."""
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    with _live_lock:
        _live.add(proc.pid)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out
    finally:
        with _live_lock:
            _live.discard(proc.pid)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _kill_live() -> None:
    with _live_lock:
        for pid in list(_live):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


_PYTEST_ARGS = [
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "_mutate_plugin",
    "--no-header",
    "-o",
    "console_output_style=classic",
]
_PYTEST = ["-m", "pytest", *_PYTEST_ARGS]


class _Server:
    """The fork server of one copy: runs pytest in a fork of a warm interpreter."""

    def __init__(self, copy_dir: Path, package: str, python: str = sys.executable) -> None:
        self.copy_dir = copy_dir
        env = _env(copy_dir, package)
        env.pop("PYTHONDONTWRITEBYTECODE")  # the warm-up writes the unmutated bytecode
        self.proc = subprocess.Popen(
            [python, "_mutate_server.py"],
            cwd=copy_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self._buffer = b""
        self._runs = 0

    def _read(self, timeout: float | None) -> dict[str, int] | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not _select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise _ServerGone(f"the test server of {self.copy_dir} ended")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply: dict[str, int] = json.loads(line)
        if "error" in reply:
            raise _ServerGone(str(reply["error"]))
        return reply

    def run(
        self,
        args: list[str],
        timeout: float | None,
        *,
        write_bytecode: bool = False,
        env: dict[str, str] | None = None,
    ) -> tuple[int | None, str]:
        """pytest *args* in a fork; (None, output) when it ran past *timeout*."""
        assert self.proc.stdin is not None
        self._runs += 1
        out = self.copy_dir / f".mutate-run-{self._runs}.out"
        env = {**({} if write_bytecode else {"PYTHONDONTWRITEBYTECODE": "1"}), **(env or {})}
        request = {"args": args, "out": str(out), "env": env}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        started = self._read(None)
        assert started is not None
        pid = started["pid"]
        with _live_lock:
            _live.add(pid)
        try:
            done = self._read(timeout)
            _killpg(pid)  # on a timeout the run itself, else what it left behind
            if done is None:
                self._read(None)
        except BaseException:
            _killpg(pid)  # interrupted: nothing of the run may outlive it
            raise
        finally:
            with _live_lock:
                _live.discard(pid)
        text = out.read_text(errors="replace")
        out.unlink()
        return (None if done is None else done["rc"]), text

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _killpg(self.proc.pid)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


class _ServerGone(RuntimeError):
    """A test server ended, or refused to start."""


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wrong_package(rc: int | None, out: str) -> None:
    if rc == 99 and "MUTATE-WRONG-PACKAGE" in out:
        sys.exit("mutate: the tests imported the real package, not the copy:\n" + out[-2000:])


def map_lines(
    copy_dir: Path,
    package: str,
    modules: list[str],
    tests: list[str],
) -> tuple[dict[str, dict[int, set[str]]], dict[str, float], list[str]]:
    """Run the suite under coverage: tests per line per module, durations, failures."""
    import coverage

    data_file = copy_dir / ".mutate-coverage"
    report = copy_dir / ".mutate-report.json"
    rcfile = copy_dir / ".mutate-coveragerc"
    rcfile.write_text("[run]\n")
    pkg_dir = copy_dir / package
    include = ",".join(str(pkg_dir / m) for m in modules)
    cmd = [
        sys.executable,
        "-m",
        "coverage",
        "run",
        f"--rcfile={rcfile}",
        f"--data-file={data_file}",
        f"--include={include}",
        *_PYTEST,
        *tests,
    ]
    rc, out = _run(cmd, copy_dir, _env(copy_dir, package, report), None)
    _wrong_package(rc, out)
    if not report.exists():
        sys.exit(
            f"mutate: the coverage run of the suite did not finish (exit {rc}):\n" + out[-4000:]
        )
    results = json.loads(report.read_text())
    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    by_module: dict[str, dict[int, set[str]]] = {}
    measured = {os.path.realpath(f): f for f in data.measured_files()}
    for m in modules:
        name = measured.get(os.path.realpath(pkg_dir / m))
        by_line = data.contexts_by_lineno(name) if name else {}
        by_module[m] = {line: set(ctxs) for line, ctxs in by_line.items()}
    return by_module, results["durations"], results["failed"]


def select(m: Mutant, by_line: dict[int, set[str]], every: set[str]) -> set[str] | None:
    """The tests to run against *m*: None when no test and no import runs its line."""
    lines = {m.stmt_line, *range(m.lineno, m.end_lineno + 1)}
    if not any(line in by_line for line in lines):
        return None
    tests = set().union(*(by_line.get(line, set()) for line in lines)) - {""}
    if tests:
        return tests & every
    # A line run only at import: its function's or class's tests, and the tests of what
    # the modules define.
    for first, last in m.scopes:
        tests = set().union(*(by_line.get(line, set()) for line in range(first, last + 1)))
        tests -= {""}
        if tests:
            shape = {t for t in every if t.split("::", 1)[0] in IMPORT_TIME_TESTS}
            return (tests | shape) & every
    return every


def run_mutant(
    m: Mutant, server: _Server, package: str, tests: set[str], durations: dict[str, float]
) -> tuple[str, float]:
    """Run *tests* against *m* in *server*'s copy: its status and the seconds it took."""

    order = sorted(tests, key=lambda t: (durations.get(t, 0.0), t))
    timeout = 20 + 3 * sum(durations.get(t, 0.0) for t in order)
    target = server.copy_dir / package / m.module
    original = target.read_text()
    stamp = target.stat()
    start = time.perf_counter()
    try:
        target.write_text(m.source)
        if int(target.stat().st_mtime) == int(stamp.st_mtime):  # never the cached bytecode's
            os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 2_000_000_000))
        for ids in (order, sorted({t.split("[", 1)[0] for t in order})):
            rc, out = server.run([*_PYTEST_ARGS, "-x", *ids], timeout)
            _wrong_package(rc, out)
            if rc not in (4, 5):
                break  # 4, 5: a test id pytest could not select; retry without parameters
    finally:
        target.write_text(original)
        os.utime(target, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # its bytecode is valid
    seconds = round(time.perf_counter() - start, 2)
    if rc is None:
        return "timeout", seconds
    if rc == 0:
        return "survived", seconds
    if rc in (4, 5) and ("not found" in out or rc == 5):
        return "error", seconds
    return "killed", seconds


def mirror_tests(m: Mutant, root: Path, tests: list[str]) -> set[str]:
    """The test file of *m*'s module (``_slots.py``: ``test_slots.py``) under each of *tests*."""
    name = f"test_{m.module.lstrip('_')}"
    return {f"{t}/{name}" for t in tests if (root / t / name).is_file()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--module",
        action="append",
        metavar="FILE",
        help="a module of the package to mutate, e.g. _resolve.py "
        "(repeatable; default: every core module)",
    )
    parser.add_argument("--root", type=Path, default=ROOT, help="the project (default: this one)")
    parser.add_argument("--package", default="patchscope", help="the package's directory name")
    parser.add_argument(
        "--tests",
        action="append",
        metavar="PATH",
        help="what pytest runs, relative to the root (default: tests)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--sample", type=int, metavar="N", help="run N mutants drawn at random")
    parser.add_argument("--seed", type=int, default=0, help="the seed of --sample (default 0)")
    parser.add_argument("--list", action="store_true", help="print the mutants; run nothing")
    parser.add_argument(
        "--rerun",
        type=Path,
        metavar="FILE",
        help="run only the survivors of an earlier run's results (its --json file) that "
        "still exist in the source, e.g. after adding tests for them",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="PYTHON",
        help="another interpreter (with pytest and the test dependencies) that runs the "
        "survivors again: its module's test file and the tests that ran its line "
        "(repeatable; e.g. each of CI's .venv-ci/py3.X/bin/python)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        default=ROOT / ".cache" / "mutate-results.json",
        help="where to write every result (default: .cache/mutate-results.json)",
    )
    args = parser.parse_args(argv)
    for i, python in enumerate(args.also):  # the servers run in the copies: an absolute path
        found = shutil.which(python) if os.sep not in python else python
        if found is None or not os.access(found, os.X_OK):
            parser.error(f"--also {python}: no such interpreter (give its path)")
        args.also[i] = os.path.abspath(found)
    root = args.root.resolve()
    modules = args.module or list(CORE_MODULES)
    tests = args.tests or ["tests"]

    mutants: list[Mutant] = []
    counts: dict[str, int] = {}
    for module in modules:
        found, broken = mutants_of(module, (root / args.package / module).read_text())
        counts[module] = len(found)
        mutants += found
        print(f"{module}: {len(found)} mutants ({broken} more did not compile, not counted)")
    if args.rerun is not None:
        mutants = _survivors_of(args.rerun, mutants)
    elif args.sample is not None and args.sample < len(mutants):
        mutants = sorted(
            random.Random(args.seed).sample(mutants, args.sample),
            key=lambda m: (modules.index(m.module), m.lineno),
        )
    if args.list:
        for m in mutants:
            print(
                f"{m.where}: {m.operator}: {m.description}\n    - {m.original}\n    + {m.mutated}"
            )
        return 0

    jobs = max(1, min(args.jobs, len(mutants)))
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        try:
            return _run_all(args, root, modules, tests, mutants, counts, jobs, Path(tmp))
        except KeyboardInterrupt:  # before any mutant ran
            _kill_live()
            print("mutate: interrupted; the project is unchanged", file=sys.stderr)
            return 130
        except _ServerGone as exc:
            _kill_live()
            sys.exit(f"mutate: {exc}")


def _survivors_of(results: Path, mutants: list[Mutant]) -> list[Mutant]:
    """The *mutants* that survived, or ran on no test's line, in an earlier run's *results*.

    A mutant is known by its module, line, mutation and the line's text before and
    after, so a survivor whose line has changed since is not found (the count says so).
    """

    def key(m: dict[str, object]) -> tuple[object, ...]:
        return tuple(m[k] for k in ("module", "lineno", "description", "original", "mutated"))

    earlier = json.loads(results.read_text())["mutants"]
    wanted = {key(m) for m in earlier if m["status"] in ("survived", "uncovered")}
    found = [m for m in mutants if key(m.as_json()) in wanted]
    print(f"--rerun: {len(found)} of the {len(wanted)} survivors of {results} still exist")
    return found


def _run_all(
    args: argparse.Namespace,
    root: Path,
    modules: list[str],
    tests: list[str],
    mutants: list[Mutant],
    counts: dict[str, int],
    jobs: int,
    tmp: Path,
) -> int:
    copies = [_copy_project(root, tmp / f"copy{i}") for i in range(jobs)]
    start = time.perf_counter()
    by_module, durations, failed = map_lines(copies[0], args.package, modules, tests)
    print(
        f"coverage run of the suite: {time.perf_counter() - start:.0f} s, "
        f"{len(durations)} tests, {len(failed)} failing before any mutation (left out)"
    )
    every = set(durations) - set(failed)
    start = time.perf_counter()

    def first(m: Mutant) -> set[str] | None:
        return select(m, by_module[m.module], every)

    interrupted = _phase(args, sys.executable, None, copies, tests, mutants, first, durations)
    for python in [] if interrupted else args.also:
        # What the first interpreter's tests let live, run again on another: its module's
        # test file and the tests that ran its line there (version-gated code runs here).
        left = [m for m in mutants if m.status in ("survived", "uncovered")]

        def again(m: Mutant) -> set[str] | None:
            if first(m) is None:
                # No test ran its line on the first interpreter (version-gated code):
                # the tests that reach it here may be in any file, so all of them.
                return set(tests)
            files = mirror_tests(m, root, tests)
            ids = {t for t in first(m) or () if t.split("::", 1)[0] not in files}
            return files | ids or None

        try:
            label = _version(python)
            interrupted = _phase(args, python, label, copies, tests, left, again, durations)
        except (_ServerGone, OSError, subprocess.SubprocessError) as exc:
            print(f"mutate: --also {python}: {exc}; no mutant ran there", flush=True)
        except KeyboardInterrupt:
            _kill_live()
            interrupted = True
        if interrupted:
            break
    elapsed = time.perf_counter() - start
    finished = [m for m in mutants if m.status]
    if interrupted:
        print(
            f"\ninterrupted: {len(finished)} of {len(mutants)} mutants finished; "
            "the report covers those"
        )
    _report(args, finished, counts, elapsed, jobs)
    return 130 if interrupted else 0


def _phase(
    args: argparse.Namespace,
    python: str,
    label: str | None,
    copies: list[Path],
    tests: list[str],
    mutants: list[Mutant],
    tests_of: Callable[[Mutant], set[str] | None],
    durations: dict[str, float],
) -> bool:
    """Run *mutants* on *python*, one server per copy; True when interrupted.

    On the first interpreter (*label* None) every mutant gets a status; on an
    ``--also`` one (named *label*) a mutant changes only when that interpreter's
    tests kill it, or survives where its line had run no test. Each phase first
    runs, unmutated and in a server, every test it will run: one that fails
    there is left out (a server is not a fresh interpreter), and the times
    measured there set the timeouts.
    """
    start = time.perf_counter()
    where = f" on {label}" if label else ""
    servers: list[_Server] = []
    free: queue.Queue[_Server] = queue.Queue()
    try:
        for copy_dir in copies:
            servers.append(_Server(copy_dir, args.package, python))
        for server in servers:  # the unmutated bytecode, and a check that the server works
            rc, out = server.run(
                [*_PYTEST_ARGS, "--collect-only", *tests], None, write_bytecode=True
            )
            _wrong_package(rc, out)
            if rc != 0:
                raise _ServerGone(f"collecting the suite failed (exit {rc}):\n{out[-4000:]}")
            free.put(server)
        if label is None:
            files = tests
        else:
            files = sorted({t.split("::", 1)[0] for m in mutants for t in tests_of(m) or ()})
        limit = None if label is None else 120 + 5 * sum(durations.values())
        timed, failing = _unmutated(servers[0], args.package, files, limit)
        bases = {t.split("[", 1)[0] for t in timed}
        print(
            f"test servers ready{where}: {time.perf_counter() - start:.0f} s; "
            f"{len(timed)} tests run unmutated there, {len(failing)} failing (left out)"
            + (f"; {len(mutants)} mutants to run again" if label else ""),
            flush=True,
        )

        def chosen(m: Mutant) -> set[str] | None:
            picked = tests_of(m)
            if picked is None:
                return None
            ids = {t for t in picked if "::" in t}
            for path in picked - ids:  # a file or folder: its tests as the unmutated run found them
                ids |= {t for t in timed if t.startswith((path + "::", path + "/"))}
            # What this interpreter has (by name: a parameter's id may differ), and passes.
            ids = {t for t in ids if t in timed or t.split("[", 1)[0] in bases}
            return ids - failing or None

        return _run_mutants(
            args, mutants, chosen, {**durations, **timed}, len(servers), free, label
        )
    finally:
        for server in servers:
            server.close()


def _unmutated(
    server: _Server, package: str, tests: list[str], timeout: float | None
) -> tuple[dict[str, float], set[str]]:
    """Run *tests* unmutated in *server*: each test's seconds, and the ones that failed."""
    if not tests:
        return {}, set()
    report = server.copy_dir / ".mutate-unmutated.json"
    report.unlink(missing_ok=True)
    rc, out = server.run([*_PYTEST_ARGS, *tests], timeout, env={"MUTATE_REPORT": str(report)})
    _wrong_package(rc, out)
    if rc is None or not report.exists():
        raise _ServerGone(f"the unmutated tests did not finish (exit {rc}):\n{out[-4000:]}")
    results = json.loads(report.read_text())
    return results["durations"], set(results["failed"])


def _version(python: str) -> str:
    """*python*'s version, as the report names the interpreter."""
    out = subprocess.run(
        [python, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def _run_mutants(
    args: argparse.Namespace,
    mutants: list[Mutant],
    tests_of: Callable[[Mutant], set[str] | None],
    durations: dict[str, float],
    jobs: int,
    free: queue.Queue[_Server],
    also: str | None,
) -> bool:
    done = 0
    lock = threading.Lock()

    stop = threading.Event()

    def work(m: Mutant) -> None:
        nonlocal done
        if stop.is_set():
            return
        selected = tests_of(m)
        if selected is None:
            status, seconds = "uncovered", 0.0
        else:
            server = free.get()
            try:
                status, seconds = run_mutant(m, server, args.package, selected, durations)
            finally:
                free.put(server)
            if stop.is_set():
                if not also:
                    m.status = ""  # its test run was cut short by the interrupt
                return
        if not also:
            m.status, m.seconds, m.tests = status, seconds, len(selected or ())
        elif status in ("killed", "timeout", "survived") and selected:
            if status != "survived":
                m.status, m.python = status, also
            elif m.status == "uncovered":
                m.status = "survived"  # its line ran tests here, and they passed
            m.seconds, m.tests = m.seconds + seconds, m.tests + len(selected)
        with lock:
            done += 1
            if also:
                if m.python == also:
                    print(f"[{done}/{len(mutants)}] {m.status} on {also}: {m.where}", flush=True)
            elif m.status not in ("killed", "timeout") or done % 25 == 0:
                print(f"[{done}/{len(mutants)}] {m.status}: {m.where} {m.description}", flush=True)

    interrupted = False
    with ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(work, m) for m in mutants]
        try:
            for future in futures:
                future.result()
        except KeyboardInterrupt:
            stop.set()
            _kill_live()
            interrupted = True
        except BaseException:
            stop.set()  # the other workers finish the mutant they hold, and no more
            _kill_live()
            raise
    return interrupted


def _report(
    args: argparse.Namespace,
    mutants: list[Mutant],
    counts: dict[str, int],
    elapsed: float,
    jobs: int,
) -> None:
    status = {
        s: [m for m in mutants if m.status == s]
        for s in ("killed", "timeout", "survived", "uncovered", "error")
    }
    scored = len(mutants) - len(status["error"])
    killed = len(status["killed"]) + len(status["timeout"])
    score = killed / scored if scored else 1.0
    print(
        f"\n{len(mutants)} mutants run in {elapsed:.0f} s with {jobs} jobs "
        f"({elapsed / max(len(mutants), 1):.2f} s a mutant)"
    )
    for module in dict.fromkeys(m.module for m in mutants):
        ms = [m for m in mutants if m.module == module and m.status != "error"]
        k = sum(m.status in ("killed", "timeout") for m in ms)
        print(f"  {module}: {k}/{len(ms)} killed (of {counts[module]} mutants in the module)")
    print(
        f"score: {killed}/{scored} killed ({100 * score:.1f}%); "
        f"{len(status['timeout'])} of them by timeout; "
        + "".join(
            f"{n} of them only on {python}; "
            for python, n in sorted(Counter(m.python for m in mutants if m.python).items())
        )
        + f"{len(status['survived'])} survived, {len(status['uncovered'])} on lines no test runs"
        + (
            f"; {len(status['error'])} not run (pytest could not select their tests)"
            if status["error"]
            else ""
        )
    )
    for m in status["survived"] + status["uncovered"] + status["error"]:
        print(
            f"{m.status}: {m.where}: {m.operator}: {m.description}\n    - {m.original}\n"
            f"    + {m.mutated}"
        )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {
                "modules": counts,
                "score": score,
                "killed": killed,
                "scored": scored,
                "seconds": round(elapsed, 1),
                "jobs": jobs,
                "sample": args.sample,
                "seed": args.seed if args.sample is not None else None,
                "mutants": [m.as_json() for m in mutants],
            },
            indent=1,
        )
    )
    print(f"results: {args.json}")


if __name__ == "__main__":
    sys.exit(main())
