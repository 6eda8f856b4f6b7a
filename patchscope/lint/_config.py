"""Read the lint's settings from ``pyproject.toml`` or ``setup.cfg``.

Both files take the same keys: ``[tool.patchscope.lint]`` in
``pyproject.toml`` (TOML arrays of strings, and a table for
``per-file-ignores``) and ``[tool:patchscope.lint]`` in ``setup.cfg`` (comma-
or newline-separated values, and ``glob: CODE, ...`` lines for
``per-file-ignores``). Each file is governed by the nearest directory, from
its own upwards, whose ``pyproject.toml`` or ``setup.cfg`` has the section, as
ruff resolves its settings; path globs are relative to that directory.
"""

from __future__ import annotations

import configparser
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .._errors import PatchscopeError
from ._rules import CODES, DEFAULT_PATCH_TARGETS, RULES, RuleSet, known_api

if sys.version_info >= (3, 11):
    import tomllib
else:  # setup.cfg installs tomli on Python 3.10
    import tomli as tomllib

PYPROJECT = "pyproject.toml"
SETUP_CFG = "setup.cfg"
_CFG_SECTION = "tool:patchscope.lint"
_TOML_SECTION = "tool.patchscope.lint"
KEYS = (
    "select",
    "ignore",
    "allow",
    "allow-apis",
    "per-file-ignores",
    "extend-apis",
    "exclude",
    "patch-targets",
    "skip-annotations",
    "extend-suppression-comments",
)
#: The sections under ``tool.patchscope``; any other is a misspelling.
_SECTIONS = ("lint",)
_BOOLEAN_KEYS = ("skip-annotations",)
# A module name, optionally ending ``.*`` for everything below it.
_TARGET = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\.\*)?")
# A suppression marker: a word with dashes, such as ``ignore-cuda``.
_MARKER = re.compile(r"[A-Za-z_][\w-]*(:[\w-]+)?")
_PER_FILE = "per-file-ignores"

# A name relative to torch.cuda: identifiers (fnmatch wildcards allowed)
# joined by dots, such as ``is_available``, ``get_device_*`` or ``nvtx.range``.
_API_NAME = re.compile(r"[A-Za-z_*?\[][\w*?\[\]!]*(\.[\w*?\[\]!]+)*")


class ConfigError(PatchscopeError, ValueError):
    """A lint setting is missing its file's expected shape or has a bad value.

    A :class:`~patchscope.PatchscopeError` like every error of the package,
    and a ``ValueError`` because the input, not the program, is wrong; the
    message names the file, the section and the key, and says what is
    accepted. The CLI prints it and exits with status 2.
    """


@dataclass(frozen=True)
class LintConfig:
    """The settings of one lint run.

    ``select`` and ``ignore`` are rule codes (``ignore`` wins); ``allow`` and
    ``exclude`` are path globs relative to ``root``: files matching ``allow``
    may use ``torch.cuda`` (only ``PS000`` is reported for them), files
    matching ``exclude`` are not read at all. ``allow_apis`` are names under
    ``torch.cuda`` (globs allowed) that are never reported;
    ``per_file_ignores`` pairs a path glob with the codes not reported for the
    files it matches. ``extend_apis`` are extra names under ``torch.cuda``,
    reported as ``PS005``. ``patch_targets`` are the modules whose
    hand-written patches ``PS010`` to ``PS013`` report (``m`` for ``m``
    itself, ``m.*`` for ``m`` and every module or object below it);
    ``skip_annotations`` leaves type annotations unchecked;
    ``extend_suppression_comments`` are comment markers (``ignore-cuda``)
    that silence every finding on their line. ``source`` is the file the
    settings came from, ``None`` for the defaults. Immutable and hashable;
    safe to share.
    """

    select: tuple[str, ...] = CODES
    ignore: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    allow_apis: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extend_apis: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    patch_targets: tuple[str, ...] = DEFAULT_PATCH_TARGETS
    skip_annotations: bool = False
    extend_suppression_comments: tuple[str, ...] = ()
    root: str = field(default_factory=os.getcwd)
    source: str | None = None

    @property
    def codes(self) -> frozenset[str]:
        """The codes that will be reported: ``select`` minus ``ignore``."""
        return frozenset(self.select) - frozenset(self.ignore)

    def rules(self, codes: frozenset[str] | None = None) -> RuleSet:
        """The rule set these settings select, limited to ``codes`` if given."""
        return RuleSet(
            self.codes if codes is None else codes,
            self.extend_apis,
            self.allow_apis,
            patch_targets=self.patch_targets,
            skip_annotations=self.skip_annotations,
            suppression_comments=self.extend_suppression_comments,
        )


def load_config(start: str | os.PathLike[str] | None = None) -> LintConfig:
    """Find and read the settings that apply in ``start`` (default: the cwd).

    Looks in ``start`` and then each parent directory; the first
    ``pyproject.toml`` or ``setup.cfg`` that has the lint's section wins. With
    none, returns the defaults rooted at ``start``. Raises :class:`ConfigError`
    for an unreadable file, a bad value, or both files of one directory having
    the section. Reads files only; safe to call from any thread.
    """
    directory = os.path.abspath(start if start is not None else os.getcwd())
    found = ConfigFinder().nearest(directory)
    return found if found is not None else LintConfig(root=directory)


def read_config(path: str | os.PathLike[str]) -> LintConfig:
    """Read the settings in the file ``path``, wherever it is (``--config``).

    A ``*.toml`` file is read like ``pyproject.toml``, a ``*.cfg`` file like
    ``setup.cfg``; globs are relative to the file's directory. Raises
    :class:`ConfigError` when the file is missing, has another name, does not
    configure the lint, or has a bad value. Reads the file only; safe to call
    from any thread.
    """
    path = os.path.abspath(path)
    if path.endswith(".toml"):
        reader = _read_toml
    elif path.endswith(".cfg"):
        reader = _read_cfg
    else:
        raise ConfigError(
            f"{path}: not a configuration file; pass a pyproject.toml (or any *.toml) "
            f"with [{_TOML_SECTION}] or a setup.cfg (or any *.cfg) with [{_CFG_SECTION}]"
        )
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: no such file")
    found = reader(path)
    if found is None:
        section = _TOML_SECTION if reader is _read_toml else _CFG_SECTION
        raise ConfigError(
            f"{path}: has no [{section}] section; add one (it may be empty), "
            "or pass the file that configures patchscope lint"
        )
    source, section, values = found
    return _parse(source, section, values, os.path.dirname(path))


class ConfigFinder:
    """Finds the configuration that governs each directory, once per directory.

    A run over a tree asks for the same directories again and again; each is
    looked up once and remembered with every directory passed on the way up.
    Not thread-safe: one finder per run.
    """

    def __init__(self) -> None:
        self._found: dict[str, LintConfig | None] = {}

    def nearest(self, directory: str) -> LintConfig | None:
        """The settings of ``directory`` (absolute) or its nearest configured parent."""
        visited = []
        current = directory
        while True:
            if current in self._found:
                found = self._found[current]
                break
            visited.append(current)
            found = _configured_in(current)
            if found is not None:
                break
            parent = os.path.dirname(current)
            if parent == current:
                break
            current = parent
        for seen in visited:
            self._found[seen] = found
        return found


def _configured_in(directory: str) -> LintConfig | None:
    found = [
        values
        for values in (
            _read_toml(os.path.join(directory, PYPROJECT)),
            _read_cfg(os.path.join(directory, SETUP_CFG)),
        )
        if values is not None
    ]
    if len(found) > 1:
        raise ConfigError(
            f"{found[0][0]} and {found[1][0]} both configure patchscope lint; "
            "keep the settings in one of them"
        )
    if not found:
        return None
    source, section, values = found[0]
    return _parse(source, section, values, directory)


_Found = tuple[str, str, Mapping[str, Any]]


def _read_toml(path: str) -> _Found | None:
    data = _read_bytes(path)
    # Most pyproject.toml files are not ours; a broken one that never
    # mentions patchscope is not worth an error here.
    if data is None or b"patchscope" not in data:
        return None
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from None
    table: Any = document
    for key in ("tool", "patchscope"):
        if not isinstance(table, dict) or key not in table:
            return None
        table = table[key]
    if isinstance(table, dict):
        for name, value in table.items():
            if isinstance(value, dict) and name not in _SECTIONS:
                raise ConfigError(
                    f"{path}: unknown section [tool.patchscope.{name}]; "
                    f"{_did_you_mean(name, 'tool.patchscope.')}"
                )
    if not isinstance(table, dict) or "lint" not in table:
        return None
    table = table["lint"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{_TOML_SECTION}] must be a table")
    return path, f"[{_TOML_SECTION}]", table


def _read_cfg(path: str) -> _Found | None:
    data = _read_bytes(path)
    if data is None or b"patchscope" not in data:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(data.decode("utf-8"), source=path)
    except (UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from None
    for name in parser.sections():
        if name.startswith("tool:patchscope.") and name != _CFG_SECTION:
            rest = name.removeprefix("tool:patchscope.")
            raise ConfigError(
                f"{path}: unknown section [{name}]; {_did_you_mean(rest, 'tool:patchscope.')}"
            )
    if not parser.has_section(_CFG_SECTION):
        return None
    section = f"[{_CFG_SECTION}]"
    values: dict[str, Any] = {}
    for key, raw in parser.items(_CFG_SECTION):
        if key == _PER_FILE:
            values[key] = _per_file_lines(raw, f"{path}: {section} {key}")
        elif key in _BOOLEAN_KEYS:
            try:
                values[key] = parser.getboolean(_CFG_SECTION, key)
            except ValueError:
                values[key] = raw  # refused by _parse, which names the key
        else:
            values[key] = [item.strip() for item in re.split(r"[,\n]", raw) if item.strip()]
    return path, section, values


def _did_you_mean(name: str, prefix: str) -> str:
    close = difflib.get_close_matches(name, _SECTIONS, n=1, cutoff=0.5)
    if close:
        return f"did you mean [{prefix}{close[0]}]?"
    if name.replace("_", "-") in KEYS:
        return f"{name!r} is a key: put it under [{prefix}lint]"
    return f"the only section is [{prefix}lint]"


def _per_file_lines(raw: str, where: str) -> dict[str, list[str]]:
    # flake8's format: one ``glob: CODE, CODE`` per line.
    table: dict[str, list[str]] = {}
    for line in raw.splitlines():
        if not line.strip():
            continue
        glob, colon, codes = line.rpartition(":")
        if not colon or not glob.strip():
            raise ConfigError(f"{where}: expected lines of 'glob: CODE, ...', got {line.strip()!r}")
        table[glob.strip()] = [code.strip() for code in codes.split(",") if code.strip()]
    return table


def _read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _parse(source: str, section: str, values: Mapping[str, Any], root: str) -> LintConfig:
    def fail(key: str, problem: str) -> ConfigError:
        return ConfigError(f"{source}: {section} {key}: {problem}")

    def check_codes(key: str, codes: Iterable[str]) -> None:
        unknown = [code for code in codes if code not in CODES]
        if unknown:
            raise fail(key, f"unknown code {unknown[0]!r}; known codes: {', '.join(CODES)}")

    settings: dict[str, tuple[str, ...]] = {}
    per_file: list[tuple[str, tuple[str, ...]]] = []
    flags: dict[str, bool] = {}
    for key, value in values.items():
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(KEYS)}"
            raise fail(key, f"unknown key; {hint}")
        if key == _PER_FILE:
            if not isinstance(value, dict) or not all(
                isinstance(codes, list) and all(isinstance(c, str) for c in codes)
                for codes in value.values()
            ):
                raise fail(key, f'expected a table of glob = ["CODE", ...], got {value!r}')
            for glob, codes in value.items():
                check_codes(f"{key} {glob!r}", codes)
                per_file.append((_globs([glob], partial(fail, key))[0], tuple(codes)))
            continue
        if key in _BOOLEAN_KEYS:
            if not isinstance(value, bool):
                raise fail(key, f"expected true or false, got {value!r}")
            flags[key] = value
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, f"expected a list of strings, got {value!r}")
        settings[key] = tuple(value)
        if key in ("allow", "exclude"):
            settings[key] = _globs(value, partial(fail, key))

    for key in ("select", "ignore"):
        check_codes(key, settings.get(key, ()))

    apis = tuple(
        _api_name(name, lambda problem: fail("extend-apis", problem))
        for name in settings.get("extend-apis", ())
    )
    allowed = tuple(
        _api_name(name, lambda problem: fail("allow-apis", problem))
        for name in settings.get("allow-apis", ())
    )
    for name in allowed:
        if not known_api(name, apis):
            names = [api for rule in RULES for api in rule.apis] + list(apis)
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else "see the rule table for the names"
            raise fail("allow-apis", f"{name!r} is not an API the lint reports; {hint}")
    for target in settings.get("patch-targets", ()):
        if not _TARGET.fullmatch(target):
            raise fail(
                "patch-targets",
                f"{target!r} is not a module name; write a dotted name such as "
                "'mypkg.backend', or 'mypkg.*' for mypkg and everything below it",
            )
    markers = tuple(m.lstrip("#").strip() for m in settings.get("extend-suppression-comments", ()))
    for marker in markers:
        if not _MARKER.fullmatch(marker) or marker.startswith("patchscope"):
            raise fail(
                "extend-suppression-comments",
                f"{marker!r} is not a comment marker; write the word that follows '#', "
                "such as 'ignore-cuda' (patchscope's own directives need no listing)",
            )
    return LintConfig(
        select=settings.get("select", CODES),
        ignore=settings.get("ignore", ()),
        allow=settings.get("allow", ()),
        allow_apis=allowed,
        per_file_ignores=tuple(per_file),
        extend_apis=apis,
        exclude=settings.get("exclude", ()),
        patch_targets=settings.get("patch-targets", DEFAULT_PATCH_TARGETS),
        skip_annotations=flags.get("skip-annotations", False),
        extend_suppression_comments=markers,
        root=root,
        source=source,
    )


def _api_name(name: str, fail: Callable[[str], ConfigError]) -> str:
    relative = name.removeprefix("torch.cuda.")
    if relative.startswith("torch.") or not _API_NAME.fullmatch(relative):
        raise fail(
            f"{name!r} is not a name under torch.cuda; write it relative to "
            "torch.cuda, like 'is_available' or 'get_device_*'"
        )
    return relative


def _globs(patterns: Iterable[str], fail: Callable[[str], ConfigError]) -> tuple[str, ...]:
    globs = []
    for pattern in patterns:
        if ".." in pattern.replace("\\", "/").split("/") or os.path.isabs(pattern):
            raise fail(
                f"{pattern!r} reaches outside the configuration's directory; globs are "
                "relative to it (put the setting in a configuration further up instead)"
            )
        # ``./build/`` and ``build`` mean the same directory.
        globs.append(pattern.removeprefix("./").rstrip("/") or ".")
    return tuple(globs)
