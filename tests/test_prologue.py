"""The checked code a redirected plain function runs (patchscope._prologue).

Each shape below is built with a stand-in dispatcher whose answer the test
sets, installed on the function, and compared with the original code run
the same way: results, exceptions, the lines of their tracebacks and every
trace event. The redirect-level behaviour is in test_call.py.
"""

from __future__ import annotations

import dis
import sys
import textwrap
import traceback
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from patchscope import _prologue
from patchscope._call import _CARRIER, _PLACEHOLDER, _passing, redirect_call


class Dispatcher:
    """What the check calls: ``active(body)`` answers ``on``; ``choose()`` the replacement."""

    def __init__(self) -> None:
        self.on = False
        self.bodies: list[types.CodeType] = []

    def active(self, body: types.CodeType) -> bool:
        self.bodies.append(body)
        return self.on

    def choose(self) -> Callable[..., Any]:
        return self.replacement

    @staticmethod
    def replacement(*args: Any, **kwargs: Any) -> Any:
        return ("replacement", args, kwargs)


def build(func: types.FunctionType, disp: Dispatcher) -> types.CodeType | None:
    params, args = _passing(func.__code__)
    carrier = _CARRIER.replace(co_consts=(disp,))
    return _prologue.build(func.__code__, carrier, params, args, _PLACEHOLDER)


SHAPES = (
    """
def no_args():
    return 1

def every_kind(a, b=2, *args, c, d=4, **kw):
    return (a, b, args, c, d, kw)

def positional_only(a, /, b):
    return a - b

def loops_and_handlers(x):
    total = 0
    for i in range(x):
        try:
            if i % 3 == 0:
                raise ValueError(i)
            total += i
        except ValueError:
            total -= 1
        finally:
            total += 100
    while total > 1000:
        total -= 7
    return total

def cell_parameters(a, b):
    def inner():
        return a + b
    return inner()

def cell_varargs(*args, **kwargs):
    def inner():
        return (args, kwargs)
    return inner()

def cell_kwonly(a, *, k):
    def inner():
        return (a, k)
    return inner()

def cell_after_a_local_cell(z, y):
    # 3.10 numbers cells in sorted order: the parameters' are not the first.
    a = 10
    def inner():
        return (a, z, y)
    return inner()

def comprehension(n):
    return [i * n for i in range(n) if i % 2]

def matches(x):
    match x:
        case [a, b]:
            return a + b
        case {"k": v}:
            return v
        case _:
            return None

def with_block(x):
    with open(__file__) as fh:
        return len(fh.read()) > x

def loop_at_the_start(x):
    while True:
        x += 1
        if x > 10:
            return x

def raises(x):
    raise KeyError(x)

def long_body(x):
    s = 0
"""
    + "    s += x\n    if s > 5:\n        s -= 1\n" * 150
    + """
    return s

def late_handlers(x):
"""
    # Handlers past unit 63: the exception table needs two bytes for them.
    + "    x = x + 1\n" * 30
    + """
    try:
        x = x // (x - 40)
    except ZeroDivisionError:
        x = -1
    try:
        if x > 50:
            raise ValueError(x)
        x += 2
    except ValueError:
        x = -2
    finally:
        x += 1000
    return x

def far_jumps(x):
"""
    # Jumps past unit 255: 3.10's absolute jumps carry an EXTENDED_ARG.
    + "    x = x + 1\n" * 100
    + """
    while x > 3:
        x -= 7
    if x < 0:
        x = -x
    return x
"""
)

CALLS: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
    "no_args": [((), {})],
    "every_kind": [((1,), {"c": 3}), ((1, 2, 3, 4), {"c": 5, "z": 6})],
    "positional_only": [((5, 3), {})],
    "loops_and_handlers": [((20,), {}), ((0,), {})],
    "cell_parameters": [((1, 2), {})],
    "cell_varargs": [((1, 2), {"k": 3})],
    "cell_kwonly": [((1,), {"k": 2})],
    "cell_after_a_local_cell": [((1, 2), {})],
    "comprehension": [((7,), {})],
    "matches": [(([1, 2],), {}), (({"k": 9},), {}), ((3,), {})],
    "with_block": [((10,), {})],
    "loop_at_the_start": [((0,), {}), ((20,), {})],
    "raises": [((1,), {})],
    "long_body": [((3,), {})],
    "late_handlers": [((10,), {}), ((0,), {}), ((30,), {})],
    "far_jumps": [((3,), {}), ((-500,), {})],
}


def shapes() -> dict[str, types.FunctionType]:
    namespace: dict[str, Any] = {"__file__": __file__}
    exec(compile(SHAPES, "<prologue shapes>", "exec"), namespace)
    return {name: namespace[name] for name in CALLS}


def outcome(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What a call gives: its result, or its exception and the lines of its traceback."""
    try:
        return ("returned", func(*args, **kwargs))
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)[1:]
        return ("raised", type(exc), str(exc), [(f.name, f.lineno) for f in frames])


def trace_events(func: Callable[..., Any], args: Any, kwargs: Any) -> list[tuple[str, Any]]:
    """The trace events of *func*'s own frame during one call."""
    events: list[tuple[str, Any]] = []
    code = func.__code__  # type: ignore[attr-defined]

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is code:
            events.append((event, frame.f_lineno))
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        outcome(func, args, kwargs)
    finally:
        sys.settrace(previous)
    return events


@pytest.fixture
def installed(request: pytest.FixtureRequest) -> Iterator[tuple[Any, types.CodeType, Dispatcher]]:
    func = shapes()[request.param]
    disp = Dispatcher()
    original = func.__code__
    yield func, original, disp
    func.__code__ = original


def _with_the_check(events: list[tuple[str, Any]], def_line: int) -> list[tuple[str, Any]]:
    """*events* of the original with the check's: one line event at the def line, after the call."""
    assert events[0][0] == "call"
    return [events[0], ("line", def_line), *events[1:]]


@pytest.mark.parametrize("installed", [n for n in CALLS if n != "long_body"], indirect=True)
def test_with_the_check_off_the_body_runs_as_before(installed: Any) -> None:
    """Results, exceptions, traceback lines and trace events are the original's.

    Plus one line event at the ``def`` line, where the check runs, before
    the body's first.
    """
    func, original, disp = installed
    calls = CALLS[func.__name__]
    expected = [outcome(func, a, k) for a, k in calls]
    expected_events = [
        _with_the_check(trace_events(func, a, k), original.co_firstlineno) for a, k in calls
    ]
    code = build(func, disp)
    assert code is not None, f"{func.__name__}: the check was not spliced in"
    func.__code__ = code
    assert [outcome(func, a, k) for a, k in calls] == expected
    assert [trace_events(func, a, k) for a, k in calls] == expected_events
    assert disp.bodies and all(body is original for body in disp.bodies)


@pytest.mark.parametrize("installed", list(CALLS), indirect=True)
def test_with_the_check_on_the_replacement_gets_the_parameters(installed: Any) -> None:
    """Positional parameters positionally, keyword-only by keyword, the rest forwarded."""
    func, _, disp = installed
    code = build(func, disp)
    if code is None:  # long_body on 3.10: its jumps would need longer arguments
        assert sys.version_info < (3, 11) and func.__name__ == "long_body"
        return
    func.__code__ = code
    disp.on = True
    args, kwargs = CALLS[func.__name__][0]
    if func.__name__ == "every_kind":
        assert func(*args, **kwargs) == ("replacement", (1, 2), {"c": 3, "d": 4})
    elif func.__name__ == "cell_varargs":  # *args and **kwargs the body reads from cells
        assert func(*args, **kwargs) == ("replacement", (1, 2), {"k": 3})
    elif func.__name__ == "cell_kwonly":  # a keyword-only parameter the body reads from a cell
        assert func(*args, **kwargs) == ("replacement", (1,), {"k": 2})
    else:
        assert func(*args, **kwargs)[0] == "replacement"


def test_a_replacement_raising_is_seen_at_the_def_line() -> None:
    """The frame of the redirected function shows where it is defined, not a missing line."""
    func = shapes()["no_args"]
    disp = Dispatcher()
    disp.on = True
    disp.replacement = lambda: 1 / 0  # type: ignore[method-assign]
    func.__code__ = build(func, disp)  # type: ignore[assignment]
    with pytest.raises(ZeroDivisionError) as info:
        func()
    frame = next(f for f in traceback.extract_tb(info.tb) if f.name == "no_args")
    assert frame.lineno == func.__code__.co_firstlineno


class _Refuses(Dispatcher):
    def active(self, body: types.CodeType) -> bool:
        raise RecursionError("the check itself fails")


def test_an_exception_from_the_check_is_seen_at_the_def_line() -> None:
    """Every instruction of the check has a location: tracebacks (and tools) get a line number."""
    func = shapes()["every_kind"]
    func.__code__ = build(func, _Refuses())  # type: ignore[assignment]
    with pytest.raises(RecursionError) as info:
        func(1, c=3)
    tb = info.tb
    while tb.tb_frame.f_code is not func.__code__:
        assert tb.tb_next is not None
        tb = tb.tb_next
    assert tb.tb_lineno == func.__code__.co_firstlineno


def test_the_body_is_the_first_code_constant_after_the_carrier() -> None:
    """What the dispatcher reads back from saved code to know which body it runs."""
    func = shapes()["cell_parameters"]  # a nested function: a code constant of its own
    disp = Dispatcher()
    code = build(func, disp)
    assert code is not None
    consts = code.co_consts
    at = next(
        i for i, c in enumerate(consts) if type(c) is types.CodeType and c.co_consts[:1] == (disp,)
    )
    assert next(c for c in consts[at + 1 :] if type(c) is types.CodeType) is func.__code__


def test_the_code_keeps_what_tools_read() -> None:
    """Name, qualified name, file, first line, flags, variables and the original's constants."""
    func = shapes()["cell_parameters"]
    original = func.__code__
    code = build(func, Dispatcher())
    assert code is not None
    for attr in ("co_name", "co_filename", "co_firstlineno", "co_flags", "co_argcount"):
        assert getattr(code, attr) == getattr(original, attr), attr
    for attr in ("co_varnames", "co_cellvars", "co_freevars"):
        assert getattr(code, attr) == getattr(original, attr), attr
    assert code.co_consts[: len(original.co_consts)] == original.co_consts
    assert code.co_names[: len(original.co_names)] == original.co_names


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.11+ positions (3.10 has line numbers only)"
)
@pytest.mark.parametrize("name", ["every_kind", "cell_parameters", "cell_after_a_local_cell"])
def test_every_instruction_of_the_original_keeps_its_position(name: str) -> None:
    """The set-up before the body (RESUME, cells) and the body keep their exact positions,
    columns included; only the check's instructions are new, at the def line."""
    func = shapes()[name]
    original = func.__code__
    code = build(func, Dispatcher())
    assert code is not None
    before, after = list(original.co_positions()), list(code.co_positions())
    at = _prologue._body_start(original) // 2
    added = len(after) - len(before)
    assert added > 0 and at > 0
    assert after[:at] == before[:at]
    assert after[at + added :] == before[at:]
    line = original.co_firstlineno
    assert after[at : at + added] == [(line, line, None, None)] * added


def test_more_constants_than_an_argument_byte_reaches_fall_back() -> None:
    """Past 255 constants the check's indexes would need longer arguments: no code, no change."""
    source = "def many(x):\n" + "".join(f"    x += {i}.5\n" for i in range(300)) + "    return x\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    assert build(namespace["many"], Dispatcher()) is None


def test_a_parameter_list_that_is_not_the_codes_is_refused() -> None:
    """The check is built only for the code's own parameters: another list gives no code."""

    def func(a: int) -> int:
        return a

    carrier = _CARRIER.replace(co_consts=(Dispatcher(),))
    assert _prologue.build(func.__code__, carrier, "x", "", _PLACEHOLDER) is None
    assert _prologue.build(func.__code__, carrier, "a", "", _PLACEHOLDER) is not None


def test_a_template_local_past_the_parameters_is_refused() -> None:
    """Only parameters are moved between the codes: a template local at the index of the
    body's first plain local, with its name, is not one."""

    def func(a: int, b: int) -> int:
        c = a + b
        return c

    def template(a: int, b: int, c: int) -> int:
        return c

    loads = [
        ins
        for ins in dis.get_instructions(template.__code__)
        if ins.opcode in dis.haslocal and ins.argval == "c"
    ]
    assert loads and func.__code__.co_varnames[loads[0].arg] == "c"
    with pytest.raises(_prologue._Unfit, match="not the same parameter"):
        _prologue._local_arg(loads[0], func.__code__, template.__code__)


def test_a_template_whose_check_does_not_end_in_a_return_is_refused() -> None:
    """The check is the code up to its one jump's target; it must end by returning the call."""

    def template(a: int) -> int:
        if not a:
            a = a + 1
        a = a * 2
        return a

    with pytest.raises(_prologue._Unfit, match="does not end in a return"):
        _prologue._prologue_span(template.__code__)


@pytest.mark.parametrize("kind", ["generator", "coroutine"])
def test_generators_and_coroutines_are_not_spliced(kind: str) -> None:
    """Their body starts later than their call: they get a trampoline (see test_call.py)."""
    source = {
        "generator": "def f(x):\n    yield x\n",
        "coroutine": "async def f(x):\n    return x\n",
    }[kind]
    namespace: dict[str, Any] = {}
    exec(textwrap.dedent(source), namespace)
    assert build(namespace["f"], Dispatcher()) is None


def test_redirect_call_installs_the_checked_original_on_a_plain_function() -> None:
    """One frame: the installed code is the function's own, with its constants and lines."""
    namespace: dict[str, Any] = {}
    exec("def plain(x):\n    return x + 1\n", namespace)
    func = namespace["plain"]
    original = func.__code__
    with redirect_call(func, lambda x: -x):
        code = func.__code__
        assert code is not original
        assert code.co_consts[: len(original.co_consts)] == original.co_consts
        lines = {line for *_, line in code.co_lines() if line is not None}
        assert lines == {line for *_, line in original.co_lines()} | {original.co_firstlineno}
        assert func(1) == -1
    assert func.__code__ is original


def test_a_jump_the_check_would_move_too_far_falls_back() -> None:
    """3.10: a jump whose moved target needs another argument byte gets no code, never a wrong jump.

    Later versions jump relative: the same body is spliced and runs as before.
    """
    func = shapes()["long_body"]
    expected = outcome(func, (3,), {})
    code = build(func, Dispatcher())
    if sys.version_info < (3, 11):
        assert code is None
        return
    assert code is not None
    func.__code__ = code
    assert outcome(func, (3,), {}) == expected


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 has no exception table")
@pytest.mark.parametrize("name", ["loops_and_handlers", "with_block", "late_handlers"])
def test_every_handler_moves_by_the_length_of_the_check(name: str) -> None:
    """The exception table is the original's, each range and target as many units later."""
    func = shapes()[name]
    original = func.__code__
    code = build(func, Dispatcher())
    assert code is not None
    moved = len(code.co_code) - len(original.co_code)
    entries = dis.Bytecode(original).exception_entries  # type: ignore[attr-defined]
    assert entries
    assert dis.Bytecode(code).exception_entries == [  # type: ignore[attr-defined]
        e._replace(start=e.start + moved, end=e.end + moved, target=e.target + moved)
        for e in entries
    ]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="the 3.11 location table")
def test_every_kind_of_location_is_written_as_it_reads_back() -> None:
    """No location, a line without columns, one over several lines, a column without its end.

    The table the check is written into keeps each code unit's location exactly.
    """
    code = shapes()["late_handlers"].__code__
    first = code.co_firstlineno
    kinds: list[tuple[Any, ...]] = [
        (None, None, None, None),
        (first + 1, first + 1, None, None),
        (first + 2, first + 4, None, None),
        (first + 1, first + 1, 3, None),
        (first + 1, first + 1, None, 7),
        (first + 3, first + 3, 2, 9),
        (first + 90, first + 93, 0, 80),
        (first, first, 1, 2),
    ]
    units = len(code.co_code) // 2
    # Runs of one location longer than one entry holds, and lines going back.
    positions = [kinds[(i // 3) % len(kinds)] for i in range(units)]
    table = _prologue._encode_positions(positions, first)
    assert list(code.replace(co_linetable=table).co_positions()) == positions


@pytest.mark.parametrize("count", range(250, 262))
def test_a_function_whose_constants_reach_the_argument_byte_is_still_redirected(
    count: int,
) -> None:
    """Where the prologue's constants would land past index 255 (one argument byte), the
    function is redirected all the same, and is its own again after the scope."""
    source = "def target(v):\n" + "".join(f"    sink({i})\n" for i in range(count))
    namespace: dict[str, Any] = {"sink": lambda value: None}
    exec(source + "    return v\n", namespace)
    target = namespace["target"]
    own = target.__code__
    with redirect_call(target, lambda v: ("replaced", v)):
        assert target(1) == ("replaced", 1)
    assert target(1) == 1 and target.__code__ is own


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.11+ positions (3.10 has line numbers only)"
)
@pytest.mark.parametrize("end", [62, 63, 4094, 4095])
def test_positions_at_the_boundaries_of_a_table_byte_are_kept(end: int) -> None:
    """Columns and line spans whose location-table numbers are 63, 64, 4095, 4096 stay exact."""
    name = "n" * (end - len("    return "))
    span = "(n" + "\n" * 64 + ")"  # an expression whose end line is 64 past its start
    source = f"def far(n):\n    return {name} + {span}\n"
    namespace: dict[str, Any] = {name: 1}
    exec(compile(source, "<far>", "exec"), namespace)
    original = namespace["far"].__code__
    assert any(p[3] == end for p in original.co_positions())
    code = build(namespace["far"], Dispatcher())
    assert code is not None
    before, after = list(original.co_positions()), list(code.co_positions())
    at = _prologue._body_start(original) // 2
    assert after[at + len(after) - len(before) :] == before[at:]
