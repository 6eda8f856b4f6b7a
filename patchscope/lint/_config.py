"""Read the lint's settings from ``pyproject.toml`` or ``setup.cfg``.

Both files take the same keys: ``[tool.patchscope.lint]`` in
``pyproject.toml`` (TOML arrays of strings) and ``[tool:patchscope.lint]`` in
``setup.cfg`` (comma- or newline-separated values). The first directory, from
the starting one upwards, whose ``pyproject.toml`` or ``setup.cfg`` has the
section supplies the settings, and path globs are relative to that directory.
"""

from __future__ import annotations

import configparser
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import PatchscopeError
from ._rules import CODES, RuleSet

if sys.version_info >= (3, 11):
    import tomllib
else:  # setup.cfg installs tomli on Python 3.10
    import tomli as tomllib

PYPROJECT = "pyproject.toml"
SETUP_CFG = "setup.cfg"
_CFG_SECTION = "tool:patchscope.lint"
_TOML_SECTION = "tool.patchscope.lint"
KEYS = ("select", "ignore", "allow", "extend-apis", "exclude")

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
    matching ``exclude`` are not read at all. ``extend_apis`` are extra names
    under ``torch.cuda``, reported as ``PS005``. ``source`` is the file the
    settings came from, ``None`` for the defaults. Immutable; safe to share.
    """

    select: tuple[str, ...] = CODES
    ignore: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    extend_apis: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    root: str = field(default_factory=os.getcwd)
    source: str | None = None

    @property
    def codes(self) -> frozenset[str]:
        """The codes that will be reported: ``select`` minus ``ignore``."""
        return frozenset(self.select) - frozenset(self.ignore)

    def rules(self) -> RuleSet:
        """The rule set these settings select."""
        return RuleSet(self.codes, self.extend_apis)


def load_config(start: str | os.PathLike[str] | None = None) -> LintConfig:
    """Find and read the settings that apply in ``start`` (default: the cwd).

    Looks in ``start`` and then each parent directory; the first
    ``pyproject.toml`` or ``setup.cfg`` that has the lint's section wins. With
    none, returns the defaults rooted at ``start``. Raises :class:`ConfigError`
    for an unreadable file, a bad value, or both files of one directory having
    the section. Reads files only; safe to call from any thread.
    """
    directory = os.path.abspath(start if start is not None else os.getcwd())
    while True:
        found = [
            values
            for values in (_read_pyproject(directory), _read_setup_cfg(directory))
            if values is not None
        ]
        if len(found) > 1:
            raise ConfigError(
                f"{found[0][0]} and {found[1][0]} both configure patchscope lint; "
                "keep the settings in one of them"
            )
        if found:
            source, section, values = found[0]
            return _parse(source, section, values, directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            return LintConfig(root=os.path.abspath(start if start is not None else os.getcwd()))
        directory = parent


_Found = tuple[str, str, Mapping[str, Any]]


def _read_pyproject(directory: str) -> _Found | None:
    path = os.path.join(directory, PYPROJECT)
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
    for key in ("tool", "patchscope", "lint"):
        if not isinstance(table, dict) or key not in table:
            return None
        table = table[key]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{_TOML_SECTION}] must be a table")
    return path, f"[{_TOML_SECTION}]", table


def _read_setup_cfg(directory: str) -> _Found | None:
    path = os.path.join(directory, SETUP_CFG)
    data = _read_bytes(path)
    if data is None or b"patchscope" not in data:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(data.decode("utf-8"), source=path)
    except (UnicodeDecodeError, configparser.Error) as exc:
        raise ConfigError(f"{path}: cannot parse: {exc}") from None
    if not parser.has_section(_CFG_SECTION):
        return None
    values = {
        key: [item.strip() for item in re.split(r"[,\n]", raw) if item.strip()]
        for key, raw in parser.items(_CFG_SECTION)
    }
    return path, f"[{_CFG_SECTION}]", values


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

    settings: dict[str, tuple[str, ...]] = {}
    for key, value in values.items():
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(KEYS)}"
            raise fail(key, f"unknown key; {hint}")
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise fail(key, f"expected a list of strings, got {value!r}")
        settings[key] = tuple(value)

    for key in ("select", "ignore"):
        unknown = [code for code in settings.get(key, ()) if code not in CODES]
        if unknown:
            raise fail(key, f"unknown code {unknown[0]!r}; known codes: {', '.join(CODES)}")

    apis = tuple(
        _api_name(name, lambda problem: fail("extend-apis", problem))
        for name in settings.get("extend-apis", ())
    )
    return LintConfig(
        select=settings.get("select", CODES),
        ignore=settings.get("ignore", ()),
        allow=_globs(settings.get("allow", ())),
        extend_apis=apis,
        exclude=_globs(settings.get("exclude", ())),
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


def _globs(patterns: Iterable[str]) -> tuple[str, ...]:
    # ``./build/`` and ``build`` mean the same directory.
    return tuple(p.removeprefix("./").rstrip("/") or "." for p in patterns)
