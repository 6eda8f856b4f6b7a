"""Check one file: parse it once, walk the tree once, report resolved uses.

The walk resolves names the way Python binds them, closely enough for a lint:

* ``import torch as t``, ``import torch.cuda as tc``, ``from torch import cuda``
  and plain assignments (``t = torch``) bind a name to a dotted path. A
  parameter, or any binding in an inner scope, shadows it there. Within one
  scope a name bound to torch *anywhere* stays bound to it: ``try: import
  torch / except ImportError: torch = None`` is the common case, and a lint
  should rather over-report a rebound name than miss the import.
* Function and lambda bodies are walked after the code around them, as
  pyflakes does, so a function sees the module's imports even when they come
  after the ``def``. Class bodies do not leak names into their methods.
* ``from torch.cuda import Event`` is reported at the import: that is where the
  API is spelled out. Later uses of the bare name are not reported again, the
  way ruff's banned-api check treats imports. Attribute chains are reported
  wherever they resolve to an API, through any alias.
* The global name ``torch`` counts as the torch module when the file never
  binds it (it then comes from a star import or a test harness).

Hand-written patches of a ``patch-targets`` module (assignments, ``del``,
``setattr``/``delattr``, ``monkeypatch``, ``unittest.mock``'s ``patch``
family, and the save/assign/restore shape) are reported as PS010 to PS013
instead of as uses; string targets (``mock.patch("torch.cuda.Event")``) are
read as written.

Comments and string literals never reach the walk, with one exception:
a string in an annotation (``Optional["torch.cuda.Stream"]``) is a type
written ahead of time, so it is parsed and checked like the unquoted form
(strings inside ``Literal[...]`` and ``Annotated[...]``'s metadata are
values, not types). Expressions inside f-string braces are code and are
checked.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ._finding import Finding
from ._rules import (
    CUDA,
    MALFORMED_SUPPRESSION,
    PARSE_ERROR,
    PATCH_ASSIGN,
    PATCH_MOCK,
    PATCH_RESTORE,
    PATCH_SETATTR,
    Match,
    RuleSet,
)
from ._suppress import apply, marked_lines, scan
from ._syntax import parse

__all__ = ["Finding", "check_file", "check_source"]


_Scope = dict[str, str | None]
_Chain = tuple[_Scope, ...]
_Positioned = ast.expr | ast.alias


class _ClassScope(dict[str, str | None]):
    """A class body's names: visible in the body, not in its methods."""


def _tracked(path: str, roots: frozenset[str]) -> bool:
    # Only names bound to torch itself, to something under torch.cuda, or
    # under a patch target's package matter.
    if path == "torch" or path == "torch.cuda" or path.startswith("torch.cuda."):
        return True
    return bool(roots) and path.partition(".")[0] in roots


def check_source(data: bytes, path: str, rules: RuleSet) -> list[Finding]:
    """Findings for one file's raw bytes, sorted by position.

    ``data`` is first checked for bytes CPython would refuse (PS000), then
    parsed once (newer syntax than this Python's is rewritten first where
    possible, see ``_syntax.py``), honouring encoding cookies and BOMs. A
    file that :meth:`RuleSet.wanted` refuses (no uncalled ``.cuda``, no
    ``from torch import cuda``, no other patch target's package, no
    ``patchscope:``) cannot have a finding, so it is not parsed;
    one without ``patchscope:`` has no suppression comments, so it is not
    tokenized. Only codes in ``rules.codes`` are reported. Pure function;
    safe to call from any thread or process.
    """
    codes = rules.codes
    source = _Source(data)
    found: list[Finding] = []
    tree = None
    problem = _encoding_problem(data)
    try:
        if problem is not None:
            found.append(_parse_error(path, problem, 1, 1))
        elif rules.wanted(data):
            tree = parse(data, path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        column = exc.offset or 1
        found.append(_parse_error(path, f"syntax error: {exc.msg}", line, column))
    except (ValueError, RecursionError, MemoryError) as exc:
        # Null bytes (ValueError before 3.12) or nesting too deep to compile.
        found.append(_parse_error(path, f"cannot parse: {exc}", 1, 1))
    if PARSE_ERROR not in codes:
        found = []
    if tree is not None and rules:
        walker = _Walker(rules, source)
        walker.run(tree)
        found += _findings(path, source, walker.hits)
    markers = rules.suppression_comments
    if found and markers and any(marker.encode() in data for marker in markers):
        quiet = marked_lines(source.text, markers)
        found = [f for f in found if f.code == PARSE_ERROR or f.line not in quiet]
    if b"patchscope:" in data:
        directives, malformed = scan(path, data, source.text)
        if MALFORMED_SUPPRESSION in codes:
            found += malformed
        found = apply(path, found, directives, codes)
    found.sort()
    return found


def _encoding_problem(data: bytes) -> str | None:
    """Why CPython would refuse to decode the file, or ``None``.

    ``ast.parse`` of bytes lets an undecodable byte in a comment through
    (``# caf\xe9`` in Latin-1 without a coding line); the interpreter
    refuses such a file, so the lint reports it.
    """
    if b"\x00" in data:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        return f"source code cannot contain null bytes (line {line}); is it a binary file?"
    if data.isascii() and b"coding" not in b"\n".join(data.split(b"\n", 2)[:2]):
        return None
    problem = None
    encoding = "utf-8"
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError as exc:  # an unknown coding, or bad bytes in the first two lines
        problem = f"cannot decode: {exc}"
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return (
            f"cannot decode line {line} as {exc.encoding}: byte {data[exc.start]:#04x} is "
            "invalid; save the file as UTF-8, or declare its encoding with a coding line "
            "('# -*- coding: latin-1 -*-')"
        )
    return problem


def check_file(path: str, rules: RuleSet) -> list[Finding]:
    """Read ``path`` and check it; an unreadable file is a ``PS000`` finding."""
    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError as exc:
        if PARSE_ERROR not in rules.codes:
            return []
        return [_parse_error(path, f"cannot read: {exc.strerror or exc}", 1, 1)]
    return check_source(data, path, rules)


class _Source:
    """A file's decoded text and lines, decoded on first use (most files need neither)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._decoded = False
        self._text: str | None = None
        self._lines: list[str] = []

    @property
    def text(self) -> str | None:
        """The decoded source, or ``None`` when it cannot be decoded."""
        return self._decode()

    def line(self, number: int) -> str:
        """Line ``number`` (1-based, newlines translated), empty when there is none."""
        self._decode()
        return self._lines[number - 1] if 0 < number <= len(self._lines) else ""

    def _decode(self) -> str | None:
        if not self._decoded:
            self._decoded = True
            try:
                self._text = importlib.util.decode_source(self.data)
            except (SyntaxError, UnicodeDecodeError, LookupError):
                self._text = None
            self._lines = (self._text or "").split("\n")
        return self._text


def _parse_error(path: str, message: str, line: int, column: int) -> Finding:
    return Finding(path, line, column, PARSE_ERROR, message, line, column)


def _findings(path: str, source: _Source, hits: list[tuple[_Positioned, Match]]) -> list[Finding]:
    found = []
    for node, match in hits:
        line = node.lineno
        end_line = node.end_lineno or line
        found.append(
            Finding(
                path,
                line,
                _char_column(source.line(line), node.col_offset),
                match.code,
                match.message,
                end_line,
                _char_column(source.line(end_line), node.end_col_offset or node.col_offset),
                match.api,
            )
        )
    return found


def _char_column(text: str, utf8_offset: int) -> int:
    """The 1-based character column of an ``ast`` UTF-8 byte offset."""
    if text.isascii():
        return utf8_offset + 1
    return len(text.encode()[:utf8_offset].decode(errors="replace")) + 1


class _Walker:
    """One iterative pass over a module; records ``(node, match)`` hits.

    Iterative (an explicit stack) because generated code nests deeply enough
    to exhaust the recursion limit. Not thread-safe; one walker per file.
    """

    def __init__(self, rules: RuleSet, source: _Source) -> None:
        self.rules = rules
        self.source = source
        self.hits: list[tuple[_Positioned, Match]] = []
        # Names ever bound to a tracked path: any other attribute root is
        # skipped without a scope lookup, which keeps the walk cheap.
        self.candidates = {"torch"} | rules.patch_roots
        self.deferred: deque[tuple[Sequence[ast.AST], _Chain]] = deque()
        # The value node of the latest ``orig = m.X`` of each patchable API.
        self.saves: dict[str, ast.expr] = {}

    def run(self, tree: ast.Module) -> None:
        self.block(tree.body, ({},))
        while self.deferred:
            self.block(*self.deferred.popleft())

    def block(self, nodes: Sequence[ast.AST], chain: _Chain) -> None:
        """Walk ``nodes`` in source order with ``chain`` as the scopes in view."""
        stack = list(reversed(nodes))
        pop, push, extend = stack.pop, stack.append, stack.extend
        handlers = _HANDLERS
        name_cls, attribute_cls, load_cls = ast.Name, ast.Attribute, ast.Load
        scope = chain[-1]
        while stack:
            # Typed ``Any``: the class checks below replace isinstance, which
            # would cost a call per node on the hot path.
            node: Any = pop()
            cls = node.__class__
            if cls is name_cls:
                if node.ctx.__class__ is not load_cls:
                    scope.setdefault(node.id, None)
                continue
            if cls is attribute_cls:
                self.attribute(node, chain, push)
                continue
            handler = handlers.get(cls)
            if handler is not None:
                handler(self, node, chain, push)
                continue
            for field in _fields(cls):
                value = getattr(node, field)
                if value.__class__ is list:
                    extend(reversed(value))
                elif isinstance(value, ast.AST):
                    push(value)

    # -- name binding -----------------------------------------------------

    def bind(self, chain: _Chain, name: str, path: str | None) -> None:
        if path is not None and _tracked(path, self.rules.patch_roots):
            chain[-1][name] = path
            self.candidates.add(name)
        else:
            chain[-1].setdefault(name, None)

    def lookup(self, name: str, chain: _Chain) -> str | None:
        for scope in reversed(chain):
            if name in scope:
                return scope[name]
        return "torch" if name == "torch" else None

    def resolve(self, node: ast.expr, chain: _Chain) -> str | None:
        """The dotted path ``node`` names, if it is a name or attribute chain."""
        parts = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.candidates:
            return None
        root = self.lookup(node.id, chain)
        if root is None:
            return None
        parts.append(root)
        return ".".join(reversed(parts))

    # -- reporting ------------------------------------------------------------

    def attribute(
        self, node: ast.Attribute, chain: _Chain, push: Callable[[ast.AST], None]
    ) -> None:
        """Resolve a whole attribute chain at once and report its API prefix.

        Only the chain's base is pushed for walking (when it is not a name):
        the links in between hold nothing else.
        """
        links = [node]
        base: Any = node.value  # ``Any``: called for every attribute, no isinstance
        while base.__class__ is ast.Attribute:
            links.append(base)
            base = base.value
        if base.__class__ is not ast.Name:
            push(base)
            return
        if base.id not in self.candidates:
            return
        root = self.lookup(base.id, chain)
        if root is None:
            return
        links.reverse()
        match = self.rules.match(".".join([root, *(link.attr for link in links)]))
        if match is None:
            return
        # The path is ``torch.cuda`` (two names), then ``match.depth`` names up
        # to the API's last one. The root binding spells the first names of
        # the path; ``links[i]`` ends at name number ``len(root names) + i``.
        last = 2 + match.depth - 1 - len(root.split("."))
        if last >= 0:  # else the API is the bound name itself, reported at its import
            self.hits.append((links[last], match))

    def annotation(self, node: ast.expr, push: Callable[[ast.AST], None]) -> None:
        """Walk an annotation, and the quoted types in it as if unquoted."""
        if self.rules.skip_annotations:
            return
        push(node)
        for string in _type_strings(node):
            assert isinstance(string.value, str)
            if self.candidates.isdisjoint(_IDENTIFIER.findall(string.value)):
                continue  # names nothing bound to torch: not worth a parse
            parsed = _parse_type_string(string, self.source)
            if parsed is not None:
                self.annotation(parsed, push)

    def patch(self, node: ast.expr, code: str, owner: str, attr: str | None, how: str) -> None:
        """Record a hand-written patch of ``owner.attr`` (``attr`` unknown: ``None``)."""
        if code in self.rules.codes:
            api = owner if attr is None else f"{owner}.{attr}"
            message = f"{how} patches {api} by hand; use {_patchscope_form(owner, attr)}"
            self.hits.append((node, Match(api, code, message, 0)))

    def patched_attribute(self, target: ast.expr, chain: _Chain) -> tuple[str, str] | None:
        """``(owner, attribute)`` when ``target`` is ``owner.attribute`` of a patch target."""
        if not self.rules.patch_targets or not isinstance(target, ast.Attribute):
            return None
        owner = self.resolve(target.value, chain)
        if owner is None or not self.rules.patched(owner):
            return None
        return owner, target.attr

    def assigned_patch(
        self,
        target: ast.Attribute,
        owner: str,
        attr: str,
        value_path: str | None,
        value: ast.expr | None,
    ) -> None:
        """An assignment ``owner.attr = value``: a patch, or the restore of a saved one."""
        api = f"{owner}.{attr}"
        if value_path == api and isinstance(value, ast.Name):
            # ``m.X = orig`` where ``orig = m.X`` earlier: the restore of a
            # save/assign/restore shape. The patch it undoes is reported
            # once, as that shape; the save is not a use of the API.
            for index in range(len(self.hits) - 1, -1, -1):
                node, match = self.hits[index]
                if match.api == api and match.code == PATCH_ASSIGN:
                    where = f"line {node.lineno}"
                    message = (
                        f"saving, replacing and restoring {api} by hand ({where} to line "
                        f"{target.lineno}) leaks the replacement to other threads and tasks "
                        f"and on failure; use {_patchscope_form(owner, attr)}"
                    )
                    if PATCH_RESTORE in self.rules.codes:
                        self.hits[index] = (node, Match(api, PATCH_RESTORE, message, 0))
                    else:
                        del self.hits[index]
                    save = self.saves.pop(api, None)
                    if save is not None:
                        self.hits = [hit for hit in self.hits if hit[0] is not save]
                    return
        self.patch(target, PATCH_ASSIGN, owner, attr, "assigning")

    def report_import(self, alias: ast.alias, path: str) -> None:
        match = self.rules.match(path)
        if match is not None:
            self.hits.append((alias, match))


_Handler = Callable[[_Walker, ast.AST, _Chain, Callable[[ast.AST], None]], None]


_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# A one-line string literal whose text is its value (no escapes, no
# concatenation): positions inside it map to the file exactly.
_PLAIN_STRING = re.compile(r"([rRuU]?)('''|\"\"\"|'|\")(.*)\2", re.S)


def _type_strings(node: ast.expr) -> Iterator[ast.Constant]:
    """The string constants of an annotation that stand for types."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Constant):
            if isinstance(item.value, str):
                yield item
        elif isinstance(item, ast.Subscript):
            head = item.value
            name = head.attr if isinstance(head, ast.Attribute) else getattr(head, "id", None)
            if name == "Literal":
                continue  # Literal["x"] holds values
            args = item.slice.elts if isinstance(item.slice, ast.Tuple) else [item.slice]
            stack.extend(args[:1] if name == "Annotated" else args)
        elif isinstance(item, ast.BinOp):  # "A" | None
            stack += [item.left, item.right]
        elif isinstance(item, (ast.Tuple, ast.List)):  # Callable[["A"], "B"]
            stack.extend(item.elts)


def _parse_type_string(string: ast.Constant, source: _Source) -> ast.expr | None:
    """The expression a quoted annotation holds, positioned in the file.

    A plain one-line literal maps every position exactly; any other string
    (escapes, several lines) puts all of it at the string's own position.
    ``None`` when the text is not an expression (then it is not a type).
    """
    value = str(string.value)
    try:
        parsed = ast.parse(value.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    shift = None
    if string.end_lineno == string.lineno and string.end_col_offset is not None:
        raw = source.line(string.lineno).encode()[string.col_offset : string.end_col_offset]
        plain = _PLAIN_STRING.fullmatch(raw.decode(errors="replace"))
        if plain is not None and plain.group(3) == value:
            lead = value[: len(value) - len(value.lstrip())]
            shift = string.col_offset + len(plain.group(1)) + len(plain.group(2))
            shift += len(lead.encode())
    for child in ast.walk(parsed):
        if not isinstance(child, (ast.expr, ast.keyword, ast.arg)):
            continue
        if shift is None:
            ast.copy_location(child, string)
        else:
            child.lineno = child.end_lineno = string.lineno
            child.col_offset += shift
            child.end_col_offset = (child.end_col_offset or 0) + shift
    return parsed


def _import(walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]) -> None:
    assert isinstance(node, ast.Import)
    for alias in node.names:
        walker.report_import(alias, alias.name)
        if alias.asname is not None:
            walker.bind(chain, alias.asname, alias.name)
        else:
            # ``import torch.cuda`` binds ``torch``, the top-level package.
            top = alias.name.partition(".")[0]
            walker.bind(chain, top, top)


def _import_from(
    walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]
) -> None:
    assert isinstance(node, ast.ImportFrom)
    # Relative imports name the project's own modules, never torch's.
    module = node.module if not node.level else None
    for alias in node.names:
        if alias.name == "*":
            continue
        path = f"{module}.{alias.name}" if module is not None else None
        if path is not None:
            walker.report_import(alias, path)
        walker.bind(chain, alias.asname or alias.name, path)


def _assign(walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]) -> None:
    # The value is checked before the targets are bound, as Python evaluates
    # it: in ``torch = torch.cuda`` the right-hand ``torch`` is the module.
    assert isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
    value = node.value
    path = None
    if value is not None:
        path = walker.resolve(value, chain)
        if isinstance(value, ast.Attribute):
            walker.attribute(value, chain, push)
        elif not isinstance(value, ast.Name):
            push(value)
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        if isinstance(target, ast.Name):
            if value is not None:  # ``x: T`` alone binds nothing
                walker.bind(chain, target.id, path)
                if path is not None and isinstance(value, ast.Attribute):
                    owner = walker.resolve(value.value, chain)
                    if owner is not None and walker.rules.patched(owner):
                        walker.saves[path] = value
            continue
        patched = walker.patched_attribute(target, chain)
        if patched is None:
            push(target)
        elif value is not None:
            assert isinstance(target, ast.Attribute)
            walker.assigned_patch(target, *patched, path, value)
    if isinstance(node, ast.AnnAssign):
        walker.annotation(node.annotation, push)


def _delete(walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]) -> None:
    assert isinstance(node, ast.Delete)
    for target in node.targets:
        patched = walker.patched_attribute(target, chain)
        if patched is None:
            push(target)
        else:
            walker.patch(target, PATCH_ASSIGN, *patched, "deleting")


def _aug_assign(
    walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]
) -> None:
    assert isinstance(node, ast.AugAssign)
    push(node.value)
    patched = walker.patched_attribute(node.target, chain)
    if patched is None:
        push(node.target)
    else:
        walker.patch(node.target, PATCH_ASSIGN, *patched, "assigning")


# Call names that may patch: ``setattr``/``delattr`` (the builtins and
# ``monkeypatch``'s), ``patch`` (``mock.patch``), and ``patch``'s methods.
_PATCH_CALLS = frozenset({"setattr", "delattr", "patch", "object", "multiple", "dict"})


def _call(walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]) -> None:
    assert isinstance(node, ast.Call)
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name in _PATCH_CALLS and walker.rules.patch_targets:
        _patch_call(walker, node, func, name, chain)
    for child in reversed([func, *node.args, *node.keywords]):
        push(child)


def _string(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _patch_call(walker: _Walker, node: ast.Call, func: ast.expr, name: str, chain: _Chain) -> None:
    args = node.args
    first: ast.expr | None = args[0] if args else None
    if first is None:
        first = next((k.value for k in node.keywords if k.arg in ("target", "in_dict")), None)
    if first is None:
        return
    on_patch = isinstance(func, ast.Attribute) and (
        getattr(func.value, "attr", None) == "patch" or getattr(func.value, "id", None) == "patch"
    )
    owner: str | None
    attr: str | None
    if name in ("setattr", "delattr"):
        code, how = PATCH_SETATTR, f"{name}()"
        if isinstance(func, ast.Attribute):
            how = f"{ast.unparse(func)}()"
        text = _string(first)
        if text is not None:  # monkeypatch.setattr("pkg.mod.name", value)
            if not isinstance(func, ast.Attribute):
                return
            owner, _, attr = text.rpartition(".")
        else:
            owner = walker.resolve(first, chain)
            attr = _string(args[1]) if len(args) > 1 else None
    elif name == "patch":
        code, how = PATCH_MOCK, "patch()"
        text = _string(first)
        if text is None:
            return
        owner, _, attr = text.rpartition(".")
    elif on_patch:
        code, how = PATCH_MOCK, f"patch.{name}()"
        text = _string(first)
        owner = text if text is not None else walker.resolve(first, chain)
        attr = None
        if name == "object":
            attr = _string(args[1]) if len(args) > 1 else None
        elif name == "multiple":
            attr = next((k.arg for k in node.keywords if k.arg), None)
        elif owner is not None:  # patch.dict(m.__dict__) patches m
            owner = owner.removesuffix(".__dict__")
    else:
        return
    if owner and walker.rules.patched(owner):
        walker.patch(node, code, owner, attr or None, how)


def _patchscope_form(owner: str, attr: str | None) -> str:
    """The patchscope form that replaces a hand-written patch of ``owner.attr``."""
    if attr is None:
        return f"patchscope.redirect_attr({owner}, NAME, ...) in a with block"
    if owner == CUDA and attr == "Event":
        return "patchscope.torch.device_events() in a with block"
    if owner == CUDA and attr in ("Stream", "current_stream", "stream", "synchronize"):
        return (
            "patchscope.torch.device_namespace() in a with block, or "
            f"patchscope.redirect_attr({owner}, {attr!r}, ...)"
        )
    if attr[:1].isupper():
        return (
            f"patchscope.redirect_construction({owner}.{attr}, ...) in a with block "
            "(it also catches constructions through other aliases)"
        )
    return (
        f"patchscope.redirect_attr({owner}, {attr!r}, ...) in a with block "
        "(or redirect_call to wrap the call)"
    )


def _function(
    walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]
) -> None:
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    args = node.args
    # Defaults, annotations and decorators run where the function is defined.
    for default in [*args.defaults, *args.kw_defaults]:
        if default is not None:
            push(default)
    params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    params += [arg for arg in (args.vararg, args.kwarg) if arg is not None]
    body: list[ast.AST]
    if isinstance(node, ast.Lambda):
        body = [node.body]
    else:
        for param in params:
            if param.annotation is not None:
                walker.annotation(param.annotation, push)
        if node.returns is not None:
            walker.annotation(node.returns, push)
        for item in [*node.decorator_list, *getattr(node, "type_params", ())]:
            push(item)
        chain[-1].setdefault(node.name, None)
        body = list(node.body)
    scope: _Scope = {param.arg: None for param in params}
    enclosing = tuple(s for s in chain if not isinstance(s, _ClassScope))
    walker.deferred.append((body, (*enclosing, scope)))


def _class(walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]) -> None:
    assert isinstance(node, ast.ClassDef)
    for item in [
        *node.bases,
        *node.keywords,
        *node.decorator_list,
        *getattr(node, "type_params", ()),
    ]:
        push(item)
    walker.block(node.body, (*chain, _ClassScope()))
    chain[-1].setdefault(node.name, None)


def _comprehension(
    walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]
) -> None:
    assert isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp))
    parts: list[ast.AST] = list(node.generators)
    if isinstance(node, ast.DictComp):
        parts += [node.key, node.value]
    else:
        parts.append(node.elt)
    walker.block(parts, (*chain, {}))


def _binds_name(field: str) -> _Handler:
    """A handler for nodes that bind the identifier in ``field`` (a ``str``)."""

    def handler(
        walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]
    ) -> None:
        name = getattr(node, field)
        if name is not None:
            chain[-1].setdefault(name, None)
        for child in reversed(list(ast.iter_child_nodes(node))):
            push(child)

    return handler


def _skip(walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]) -> None:
    pass


def _match_class(
    walker: _Walker, node: ast.AST, chain: _Chain, push: Callable[[ast.AST], None]
) -> None:
    # ``kwd_attrs`` is a list of plain strings, so the generic walk cannot
    # push it; the patterns may bind names and must be walked.
    assert isinstance(node, ast.MatchClass)
    for child in [node.cls, *node.patterns, *node.kwd_patterns]:
        push(child)


_HANDLERS: dict[type[Any], _Handler] = {
    type(None): _skip,  # ``Dict.keys`` holds None for ``**mapping``
    ast.Constant: _skip,
    ast.Global: _skip,
    ast.Nonlocal: _skip,
    ast.Import: _import,
    ast.ImportFrom: _import_from,
    ast.Assign: _assign,
    ast.AugAssign: _aug_assign,
    ast.Delete: _delete,
    ast.Call: _call,
    ast.AnnAssign: _assign,
    ast.NamedExpr: _assign,
    ast.FunctionDef: _function,
    ast.AsyncFunctionDef: _function,
    ast.Lambda: _function,
    ast.ClassDef: _class,
    ast.ListComp: _comprehension,
    ast.SetComp: _comprehension,
    ast.GeneratorExp: _comprehension,
    ast.DictComp: _comprehension,
    ast.ExceptHandler: _binds_name("name"),
    ast.MatchAs: _binds_name("name"),
    ast.MatchStar: _binds_name("name"),
    ast.MatchMapping: _binds_name("rest"),
    ast.MatchClass: _match_class,
}

# Fields that never hold nodes worth walking: expression contexts and
# operator singletons.
_NOT_CHILDREN = frozenset({"ctx", "op", "ops"})
_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}


def _fields(cls: type[ast.AST]) -> tuple[str, ...]:
    fields = _FIELDS.get(cls)
    if fields is None:
        # Reversed, so that the stack pops a node's fields in source order
        # (an ``if`` test, with its walrus bindings, before the body).
        fields = tuple(f for f in reversed(cls._fields) if f not in _NOT_CHILDREN)
        _FIELDS[cls] = fields
    return fields
