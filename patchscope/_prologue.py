"""The code a redirected plain function runs: its own code, after a check.

A trampoline (``_call._trampoline``) is a second function frame on every
call. For a plain (not generator, coroutine or async generator) function the
redirect installs, instead, the function's own code with a few instructions
in front of its body, compiled from::

    if <carrier>.co_consts[0].active(<the original code>):
        return <carrier>.co_consts[0].choose()(<the parameters>)

so a call from a context where no redirect of it is active pays one C check
and runs the body in the same frame. ``active`` is the dispatcher's (see
``_call._PyCallDispatcherBase.active``); it is told which original the body
is, so that code built before somebody else replaced the function's code
never runs a stale body (it asks ``choose``, which runs the shadow of the
current original).

The instructions are taken from a template function with the same
parameters, compiled by this interpreter, between its first ``RESUME`` (the
start on 3.10) and the jump's target; the template's constants and names
are appended to the function's own, and the indexes the instructions carry
rewritten to them. Inserting code moves everything after it, so the line
table is written again (the check and the call of a replacement at the
``def`` line: every instruction has a location, so a traceback through the
check has a line number; ``sys.settrace`` sees one line event there before
the body's first), the exception table's offsets move
(3.11+), and so do absolute jump targets (3.10; later versions jump
relative, and nothing jumps from the body to before it). Where any of this
cannot be done exactly (an index past 255, a jump whose encoding would
grow, an instruction the template was not expected to hold), :func:`build`
answers None and the caller falls back to the trampoline.
"""

from __future__ import annotations

import dis
import sys
import types
from typing import Any

#: What the template's source names the original code by, replaced by it.
_BODY = "patchscope:body"
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_RESUME = dis.opmap.get("RESUME")
_RETURN_VALUE = dis.opmap["RETURN_VALUE"]
_LOAD_ATTR = dis.opmap["LOAD_ATTR"]
_LOAD_METHOD = dis.opmap.get("LOAD_METHOD")
#: Generator, coroutine, iterable coroutine and async generator flags.
_STARTS_LATER = 0x20 | 0x80 | 0x100 | 0x200
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)
#: 3.12+: LOAD_ATTR's argument is the name's index shifted left by one, the
#: low bit saying whether a method is loaded.
_ATTR_SHIFT = 1 if sys.version_info >= (3, 12) else 0


class _Unfit(Exception):
    """The prologue cannot be spliced exactly into this code."""


def build(
    original: types.CodeType, carrier: types.CodeType, params: str, args: str, placeholder: str
) -> types.CodeType | None:
    """*original* with the check in front of its body, or None where it cannot be built exactly.

    *params* is the parameter list of the original's signature (as source),
    *args* the call that passes them on, *placeholder* the string constant
    the carrier replaces.
    """
    try:
        return _build(original, carrier, params, args, placeholder)
    except _Unfit:
        return None


def _build(
    original: types.CodeType, carrier: types.CodeType, params: str, args: str, placeholder: str
) -> types.CodeType:
    if original.co_flags & _STARTS_LATER:
        raise _Unfit("a generator's or coroutine's body starts after its call")
    template = _template(original, params, args, placeholder)
    start, end = _prologue_span(template)
    consts = list(original.co_consts)
    names = list(original.co_names)
    code = bytearray(template.co_code[start:end])
    moved: dict[tuple[bool, Any], int] = {}  # (a name?, template index) -> index in the result
    for ins in _instructions(template, start, end):
        new_arg = _new_arg(ins, original, template, consts, names, moved, carrier, placeholder, end)
        if new_arg is not None:
            if new_arg > 255:
                raise _Unfit("an index past what one argument byte holds")
            code[ins.offset - start + 1] = new_arg
    at = _body_start(original)
    units = len(code) // 2
    body = original.co_code
    if sys.version_info < (3, 11):
        body = _moved_absolute_jumps(body, units)
    changes: dict[str, Any] = {
        "co_code": body[:at] + bytes(code) + body[at:],
        "co_consts": tuple(consts),
        "co_names": tuple(names),
        "co_stacksize": max(original.co_stacksize, template.co_stacksize),
        "co_linetable": _line_table(original, at // 2, units),
    }
    if sys.version_info >= (3, 11):
        changes["co_exceptiontable"] = _moved_exception_table(original, at // 2, units)
    return original.replace(**changes)


def _template(original: types.CodeType, params: str, args: str, placeholder: str) -> types.CodeType:
    """A function of *original*'s parameters whose code starts with the check."""
    positional = original.co_argcount + original.co_kwonlyargcount
    positional += bool(original.co_flags & 0x04) + bool(original.co_flags & 0x08)
    parameters = original.co_varnames[:positional]
    # Parameters the body reads from a cell are cells in the template too, so
    # that it loads them as the body's frame holds them.
    cells = [name for name in parameters if name in original.co_cellvars]
    disp = f"{placeholder!r}.co_consts[0]"
    lines = [
        f"def template({params}):",
        f"    if {disp}.active({_BODY!r}):",
        f"        return {disp}.choose()({args})",
    ]
    if cells:
        lines.append(f"    if 0: (lambda: ({', '.join(cells)},))")
    module = compile("\n".join(lines) + "\n", original.co_filename, "exec", dont_inherit=True)
    template = next(c for c in module.co_consts if isinstance(c, types.CodeType))
    if template.co_varnames[:positional] != parameters or template.co_argcount != (
        original.co_argcount
    ):
        raise _Unfit("the template's parameters differ")
    return template


def _instructions(code: types.CodeType, start: int, end: int) -> list[dis.Instruction]:
    return [ins for ins in dis.get_instructions(code) if start <= ins.offset < end]


def _prologue_span(template: types.CodeType) -> tuple[int, int]:
    """Byte offsets in *template*: (the check's first, past the call that follows it)."""
    start = _body_start(template)
    jumps = [ins for ins in dis.get_instructions(template) if ins.opcode in _JUMPS]
    if len(jumps) != 1 or not isinstance(jumps[0].argval, int):
        raise _Unfit("the template's check is not one jump")
    end = jumps[0].argval
    inside = _instructions(template, start, end)
    if (
        not inside
        or inside[-1].opcode != _RETURN_VALUE
        or any(ins.opcode == _EXTENDED_ARG for ins in inside)
    ):
        raise _Unfit("the template's check does not end in a return")
    return start, end  # the return is not the jump: the call is after the check


def _body_start(code: types.CodeType) -> int:
    """The byte offset past the frame's set-up: after the first RESUME (3.11+), else 0."""
    if _RESUME is None:
        return 0
    found = False
    for ins in dis.get_instructions(code):
        if found:
            return ins.offset
        found = ins.opcode == _RESUME
    raise _Unfit("no RESUME")


def _new_arg(
    ins: dis.Instruction,
    original: types.CodeType,
    template: types.CodeType,
    consts: list[Any],
    names: list[str],
    moved: dict[tuple[bool, Any], int],
    carrier: types.CodeType,
    placeholder: str,
    end: int,
) -> int | None:
    """The argument *ins* takes in the spliced code, or None to keep the template's."""
    op = ins.opcode
    arg = ins.arg or 0
    if op in dis.hasconst:
        if (False, arg) not in moved:
            value = template.co_consts[arg]
            if type(value) is str and value == placeholder:
                value = carrier
            elif type(value) is str and value == _BODY:
                value = original
            consts.append(value)
            moved[False, arg] = len(consts) - 1
        return moved[False, arg]
    if op in dis.hasname:
        if op not in (_LOAD_ATTR, _LOAD_METHOD):
            raise _Unfit(f"an unexpected name instruction {ins.opname}")
        if (True, ins.argval) not in moved:
            names.append(ins.argval)
            moved[True, ins.argval] = len(names) - 1
        index = moved[True, ins.argval]
        if op == _LOAD_ATTR:
            return (index << _ATTR_SHIFT) | (arg & _ATTR_SHIFT)
        return index
    if op in dis.haslocal or op in dis.hasfree:
        return _local_arg(ins, original, template)
    if op in _JUMPS:
        if ins.argval != end:
            raise _Unfit("a jump elsewhere than past the call")
        return None  # relative (3.11+), or absolute from 0 in both (3.10)
    return None


def _local_arg(ins: dis.Instruction, original: types.CodeType, template: types.CodeType) -> int:
    """A parameter's index: the same in both codes (checked), except a 3.10 cell's."""
    nparams = (
        original.co_argcount
        + original.co_kwonlyargcount
        + bool(original.co_flags & 0x04)
        + bool(original.co_flags & 0x08)
    )
    arg: int = ins.arg  # type: ignore[assignment]
    wanted = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
    if sys.version_info < (3, 11) and ins.opcode in dis.hasfree:
        cells = original.co_cellvars + original.co_freevars
        if ins.argval not in cells:
            raise _Unfit("a cell the body does not have")
        return cells.index(ins.argval)
    # 3.13+ pairs two locals in one argument, four bits each.
    indexes = (arg >> 4, arg & 15) if len(wanted) == 2 else (arg,)
    for index, name in zip(indexes, wanted, strict=True):
        if index >= nparams or original.co_varnames[index] != name:
            raise _Unfit("a local that is not the same parameter")
    return arg


def _moved_absolute_jumps(code: bytes, units: int) -> bytes:
    """3.10: *code* with every absolute jump target *units* instructions later."""
    out = bytearray(code)
    i = 0
    while i < len(code):
        first = i
        arg = 0
        while code[i] == _EXTENDED_ARG:
            arg = (arg | code[i + 1]) << 8
            i += 2
        op = code[i]
        arg |= code[i + 1]
        if op in dis.hasjabs:
            moved = arg + units
            prefixes = (i - first) // 2
            if moved >= 1 << (8 * (prefixes + 1)):
                raise _Unfit("a jump whose argument would need another byte")
            for k in range(prefixes + 1):
                out[i + 1 - 2 * k] = (moved >> (8 * k)) & 0xFF
        i += 2
    return bytes(out)


def _line_table(original: types.CodeType, at: int, units: int) -> bytes:
    """*original*'s line table with the prologue's *units* code units inserted at unit *at*.

    They (the check and the call) have the ``def`` line's location, so that
    a traceback through the check (a RecursionError or KeyboardInterrupt
    raised by its call) or through a replacement, and a debugger stepping
    into it, shows where the redirected function is. A unit without a
    location would give such a traceback no line number at all, which
    tools that format tracebacks do not expect. The price is one line event
    at the ``def`` line per call under ``sys.settrace``.
    """
    if sys.version_info < (3, 11):
        # Pairs of (bytes, line delta): the prologue is at 0, and delta 0
        # keeps it on the first line, where the running line starts.
        pairs = bytearray()
        size = units * 2
        while size > 0:
            step = min(size, 254)
            pairs += bytes((step, 0))
            size -= step
        return bytes(pairs) + original.co_linetable
    positions = list(original.co_positions())
    line = original.co_firstlineno
    positions[at:at] = [(line, line, None, None)] * units
    return _encode_positions(positions, original.co_firstlineno)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 64:
        out.append(64 | (value & 63))
        value >>= 6
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _varint(((-value) << 1) | 1 if value < 0 else value << 1)


def _encode_positions(positions: list[Any], first_line: int) -> bytes:
    """The 3.11+ location table of one (line, end line, column, end column) per code unit.

    Each run of one location is one entry: "no location" (kind 15), or the
    long form (kind 14), which holds any location; the compiler's shorter
    forms only save bytes.
    """
    out = bytearray()
    line = first_line
    i = 0
    while i < len(positions):
        pos = positions[i]
        length = 1
        while length < 8 and i + length < len(positions) and positions[i + length] == pos:
            length += 1
        start, end_line, col, end_col = pos
        if start is None:
            out.append(0x80 | (15 << 3) | (length - 1))
        else:
            out.append(0x80 | (14 << 3) | (length - 1))
            out += _svarint(start - line)
            out += _varint(end_line - start)  # never None where the line is not
            out += _varint(0 if col is None else col + 1)
            out += _varint(0 if end_col is None else end_col + 1)
            line = start
        i += length
    return bytes(out)


def _moved_exception_table(original: types.CodeType, at: int, units: int) -> bytes:
    """3.11+: *original*'s exception table with offsets from unit *at* on moved by *units*."""
    if sys.version_info < (3, 11):
        raise _Unfit("3.10 has no exception table")
    table = original.co_exceptiontable
    out = bytearray()
    i = 0

    def item() -> int:
        nonlocal i
        byte = table[i]
        i += 1
        value = byte & 63
        while byte & 64:
            byte = table[i]
            i += 1
            value = (value << 6) | (byte & 63)
        return value

    def emit(value: int, msb: int) -> None:
        chunks = [value & 63]
        value >>= 6
        while value:
            chunks.append(value & 63)
            value >>= 6
        chunks.reverse()
        for k, chunk in enumerate(chunks):
            more = 64 if k < len(chunks) - 1 else 0
            out.append(chunk | more | (msb if k == 0 else 0))

    while i < len(table):
        start, size, target, depth_lasti = item(), item(), item(), item()
        if start < at < start + size:
            raise _Unfit("a handler's range spans the insertion")
        emit(start + units if start >= at else start, 128)
        emit(size, 0)
        emit(target + units if target >= at else target, 0)
        emit(depth_lasti, 0)
    return bytes(out)
