"""The switch between the C accelerator and the Python twins (patchscope._accel).

The whole suite runs once with the accelerator and once with
``PATCHSCOPE_PURE_PYTHON=1`` (see .ci/run), and test_parity drives both twins
in one process; these tests check what only the records themselves can show:
which implementation is in use, and that no path leaks or over-frees the
objects it handles (reference-count bugs in C show up here as growing counts,
or as a crash).
"""

from __future__ import annotations

import ast
import contextlib
import gc
import importlib.util
import os
import re
import subprocess
import sys
import threading
import types
import warnings
from pathlib import Path

import pytest
from _threads import in_other_thread

import patchscope
from patchscope import _accel, _entry, _handles, _redirect, _registry

ROUNDS = 300


def test_accelerator_in_use_unless_pure_python_is_asked_for() -> None:
    """ACCELERATED is True exactly when the extension is built and not switched off."""
    built = importlib.util.find_spec("patchscope._speedups") is not None
    assert _accel.ACCELERATED is (built and not _accel._flag("PATCHSCOPE_PURE_PYTHON"))
    assert patchscope.ACCELERATED is _accel.ACCELERATED  # the public name
    assert (_accel.speedups is not None) is _accel.ACCELERATED
    if _accel.ACCELERATED:
        assert _redirect.with_enter is _accel.speedups.RedirectCore._c_with_enter
        assert _entry.Entry is _accel.speedups.Entry
        assert _registry.exit is _accel.speedups.exit
    else:
        assert _redirect.with_enter is _redirect._py_with_enter
        assert _entry.Entry is _entry._PyEntry
        assert _handles.ActivationBase is _handles._PyActivationBase


def test_only_the_switch_reads_the_extension() -> None:
    """No module but _accel names patchscope._speedups: every twin is picked in one place."""
    package = Path(patchscope.__file__).parent
    readers = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            named = (isinstance(node, ast.Name) and node.id == "speedups") or (
                isinstance(node, ast.alias) and node.name in ("speedups", "_speedups")
            )
            if named or (isinstance(node, ast.Constant) and node.value == "patchscope._speedups"):
                readers.append(f"{path.relative_to(package)}:{node.lineno}")
    assert readers and all(reader.startswith("_accel.py:") for reader in readers), readers


def test_every_c_twin_is_named_in_the_contract_table() -> None:
    """Each name the extension exports is listed in speedups.h's table with its Python twin."""
    if not _accel.ACCELERATED:
        pytest.skip("needs the C accelerator")
    # The source tree's header (an installed wheel carries no C sources).
    header = Path(__file__).resolve().parents[1] / "patchscope" / "_c" / "speedups.h"
    if not header.exists():
        pytest.skip("needs the C sources beside the tests")
    table = header.read_text(encoding="utf-8").split("#ifndef", 1)[0]
    exported = [name for name in vars(_accel.speedups) if not name.startswith("__")]
    missing = [name for name in exported if not re.search(rf"\b{re.escape(name)}\b", table)]
    assert exported and missing == []


def _fresh_python(code: str, pure: str | None = None) -> str:
    """What *code* prints in a fresh interpreter; PATCHSCOPE_PURE_PYTHON is *pure*, or unset."""
    env = {k: v for k, v in os.environ.items() if k != "PATCHSCOPE_PURE_PYTHON"}
    if pure is not None:
        env["PATCHSCOPE_PURE_PYTHON"] = pure
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _without_speedups(error: str) -> str:
    """Source that makes importing ``patchscope._speedups`` raise *error* (an expression)."""
    return (
        "import sys, importlib.abc\n"
        "class Blocked(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name == 'patchscope._speedups':\n"
        f"            raise {error}\n"
        "sys.meta_path.insert(0, Blocked())\n"
    )


@pytest.mark.parametrize("value", ["1", "true", "Yes", " on "])
def test_pure_python_switch_selects_the_python_twins(value: str) -> None:
    """PATCHSCOPE_PURE_PYTHON=1 (or true, yes, on) in a fresh interpreter gives the Python twins."""
    code = (
        "import patchscope, patchscope._entry as e, patchscope._redirect as r;"
        "print(patchscope.ACCELERATED, r.with_enter is r._py_with_enter, e.Entry is e._PyEntry)"
    )
    assert _fresh_python(code, value).split() == ["False", "True", "True"]


@pytest.mark.parametrize("value", ["", "0", "false", "No", "OFF"])
def test_pure_python_switched_off_leaves_the_accelerator_in_use(value: str) -> None:
    """PATCHSCOPE_PURE_PYTHON=0 (or false, no, off, empty) keeps the accelerator, if built."""
    built = importlib.util.find_spec("patchscope._speedups") is not None
    out = _fresh_python("import patchscope; print(patchscope.ACCELERATED)", value)
    assert out.split() == [str(built)]


def test_an_accelerator_that_does_not_load_warns_and_python_runs() -> None:
    """A built extension that fails to import gives one RuntimeWarning and the Python twins."""
    code = _without_speedups("ImportError('undefined symbol: PyFoo')") + (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import patchscope, patchscope._entry as e\n"
        "print(patchscope.ACCELERATED, e.Entry is e._PyEntry)\n"
        "print([str(w.message) for w in caught if w.category is RuntimeWarning])\n"
        "print([w.filename for w in caught if w.category is RuntimeWarning])\n"
    )
    flags, messages, where = _fresh_python(code).splitlines()
    assert flags.split() == ["False", "True"]
    assert "undefined symbol: PyFoo" in messages and "running in pure Python" in messages
    assert messages.count("patchscope._speedups") == 1
    # it points at the import that loaded patchscope, not into the package
    assert where == "['<string>']"


class _Built:
    """A class whose constructions are redirected."""


class _BuiltDict(_Built, dict):  # type: ignore[type-arg]
    """A subclass that inherits a builtin __new__ after _Built's."""


class _DictBuilt(dict):  # type: ignore[type-arg]
    """A redirected class whose own constructions go through dict.__new__."""


class _Replacement:
    """What the constructions build instead."""


class _Attr:
    """The value of _WithMethod.attr: an object only these tests refer to."""


def _called(x: int) -> int:
    """A function whose calls are redirected in both scopes."""
    return x


def _call_replacement(x: int) -> int:
    return -x


class _WithMethod:
    """A class whose method and attribute are redirected in context scope."""

    attr = _Attr()

    def method(self) -> str:
        return "method"


def _live(kind: type) -> int:
    gc.collect()
    return sum(1 for obj in gc.get_objects() if type(obj) is kind)


def _every_path(mod: types.ModuleType, replacement: object) -> None:
    """One round of every registry path the accelerator takes or hands on."""
    process = patchscope.redirect_attr(mod, "value", replacement)
    context = patchscope.redirect_attr(mod, "value", replacement, scope="context")
    other = patchscope.redirect_attr(mod, "other", replacement, scope="context")
    construction = patchscope.redirect_construction(_Built, _Replacement)
    dict_construction = patchscope.redirect_construction(_DictBuilt, _Replacement)
    everywhere = patchscope.redirect_construction(_Built, _Replacement, scope="process")
    method = patchscope.redirect_attr(_WithMethod, "method", lambda self: "r", scope="context")
    attr = patchscope.redirect_attr(_WithMethod, "attr", replacement, scope="context")
    by_path = patchscope.redirect_attr(f"{__name__}._TARGET", "value", replacement)
    call = patchscope.redirect_call(_called, _call_replacement)
    call_everywhere = patchscope.redirect_call(_called, _call_replacement, scope="process")

    def other_thread_reads() -> None:  # the C paths that serve other threads
        assert mod.value == "orig" and _WithMethod().method() == "method"
        assert type(_WithMethod.attr) is _Attr and type(_Built()) is _Built
        assert _BuiltDict(a=1) == {"a": 1} and _DictBuilt(b=2) == {"b": 2}
        assert _called(1) == 1

    with context, method, attr, construction, dict_construction, call:
        assert _called(1) == -1
        in_other_thread(other_thread_reads)
    with call_everywhere:
        assert _called(1) == -1
    with everywhere:
        assert isinstance(_Built(), _Replacement) and type(_BuiltDict()) is _BuiltDict

    @process
    def decorated() -> object:
        return mod.value

    assert decorated() is replacement
    with process:
        with process:  # nested: the general path
            pass
    with context, other:  # two slots on one module
        assert mod.value is replacement and mod.other is replacement
    with construction:
        assert isinstance(_Built(), _Replacement)
    with patchscope.combine(process, context, construction):
        pass
    with contextlib.ExitStack() as stack:  # pairing from a foreign frame
        stack.enter_context(context)
        stack.enter_context(process)
    process.start().stop()
    context.start().stop()
    with by_path:  # resolved at each activation
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", patchscope.RedirectConflictWarning)
        with process:
            mod.value = "rebound by someone else"  # a conflict on exit
    mod.value = "orig"


_TARGET = types.ModuleType("records_target")
_TARGET.value = "orig"


def test_no_path_leaks_activations_entries_or_values() -> None:
    """Hundreds of rounds of every path leave no activation, entry or reference behind."""
    mod = types.ModuleType("records_leak")
    mod.value = "orig"
    mod.other = "other"
    replacement = object()
    # Everything the paths hand around: a reference kept or dropped once per
    # round shows as a count that moves.
    watched = [
        replacement,
        mod,
        _Built,
        _BuiltDict,
        _DictBuilt,
        _Replacement,
        vars(_WithMethod)["method"],
        vars(_WithMethod)["attr"],
        _called,
        _called.__code__,
        _call_replacement,
        dict.__new__,
        object.__new__,
    ]
    _every_path(mod, replacement)  # caches: dispatchers, slots, private subclasses

    def counts() -> list[int]:
        live = [_live(patchscope.Activation), _live(_entry.Entry)]
        return live + [sys.getrefcount(obj) for obj in watched]

    before = counts()
    for _ in range(ROUNDS):
        _every_path(mod, replacement)
    assert counts() == before
    assert patchscope.active() == ()
    assert mod.value == "orig" and type(mod) is types.ModuleType
    assert "__new__" not in vars(_Built) and type(_Built()) is _Built
    assert _BuiltDict(a=1) == {"a": 1}


def test_other_threads_read_through_the_slot_while_a_context_redirect_is_live() -> None:
    """A module slot's reads from another thread give the original, many times over."""
    mod = types.ModuleType("records_slot")
    mod.value = original = object()
    replacement = object()
    entered, release = threading.Event(), threading.Event()
    seen: list[object] = []

    def holder() -> None:
        with patchscope.redirect_attr(mod, "value", replacement, scope="context"):
            seen.append(mod.value)
            entered.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(60)
        reads = {id(mod.value) for _ in range(10_000)}
        assert reads == {id(original)}
        with pytest.raises(AttributeError):
            mod.missing  # noqa: B018 - the slot does not invent attributes
    finally:
        release.set()
        thread.join(60)
    assert not thread.is_alive()
    assert seen == [replacement]
    assert mod.value is original and type(mod) is types.ModuleType


@pytest.mark.skipif(
    not _accel.ACCELERATED,
    reason="the Python records are ordinary slotted objects: deleting a field "
    "is a misuse that fails later with AttributeError, never a crash",
)
def test_c_records_refuse_deleting_a_field() -> None:
    """The C fast path reads fields without NULL checks, so their deletion is refused."""
    mod = types.ModuleType("records_del")
    mod.value = "orig"
    r = patchscope.redirect_attr(mod, "value", "r")
    handle = r.start()
    entry = handle._entry
    for obj, name in [(r, "_value"), (r, "_handles"), (handle, "_entry"), (entry, "slot")]:
        with pytest.raises(AttributeError, match="cannot delete"):
            delattr(obj, name)
    handle.stop()
    with r:
        assert mod.value == "r"
    assert mod.value == "orig" and patchscope.active() == ()


def test_activations_can_be_weakly_referenced() -> None:
    """A handle supports weakref, in both implementations."""
    import weakref

    mod = types.ModuleType("records_weak")
    mod.value = "orig"
    handle = patchscope.redirect_attr(mod, "value", "h").start()
    ref = weakref.ref(handle)
    assert ref() is handle
    handle.stop()
    del handle
    gc.collect()
    assert ref() is None


def test_an_accelerator_that_is_not_built_leaves_python_running_without_a_warning() -> None:
    """No extension at all: the Python twins serve, quietly, and redirects work."""
    code = _without_speedups("ModuleNotFoundError('no _speedups', name=name)") + (
        "import types, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import patchscope, patchscope._accel as a, patchscope._entry as e\n"
        "mod = types.ModuleType('m')\n"
        "mod.x = 1\n"
        "with patchscope.redirect_attr(mod, 'x', 2):\n"
        "    seen = mod.x\n"
        "print(patchscope.ACCELERATED, a.speedups is None, e.Entry is e._PyEntry, seen, mod.x)\n"
        "print(len(caught))\n"
    )
    flags, count = _fresh_python(code).splitlines()
    assert flags.split() == ["False", "True", "True", "2", "1"]
    assert count == "0"


def test_a_module_the_accelerator_needs_that_is_missing_is_not_taken_for_an_unbuilt_one() -> None:
    """The extension is there but imports a module that is not: that error reaches the user
    (it names what to install), instead of a quiet fall back to pure Python."""
    code = _without_speedups("ModuleNotFoundError('No module named dep', name='dep')") + (
        "try:\n"
        "    from patchscope import ACCELERATED\n"
        "except ModuleNotFoundError as exc:\n"
        "    print('raised', exc.name)\n"
        "else:\n"
        "    print('imported', ACCELERATED)\n"
    )
    assert _fresh_python(code).split() == ["raised", "dep"]


def test_with_the_accelerator_the_public_factory_is_a_c_twin_that_redirects() -> None:
    """A fresh interpreter with the extension: redirect_attr is the C twin, named and documented
    as the Python function, and it redirects."""
    if importlib.util.find_spec("patchscope._speedups") is None:
        pytest.skip("the C accelerator is not built")
    code = (
        "import types, patchscope\n"
        "f = patchscope.redirect_attr\n"
        "mod = types.ModuleType('m')\n"
        "mod.x = 1\n"
        "with f(mod, 'x', 2) as value:\n"
        "    seen = (value, mod.x)\n"
        "print(patchscope.ACCELERATED, type(f) is not types.FunctionType, f.__name__,\n"
        "      f.__doc__ == f.__wrapped__.__doc__, seen, mod.x)\n"
    )
    expected = ["True", "True", "redirect_attr", "True", "(2,", "2)", "1"]
    assert _fresh_python(code).split() == expected
