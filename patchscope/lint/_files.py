"""Which files a run reads, under which settings, reporting which codes.

Each path is governed by one configuration: the one given to the run, or the
nearest above the path. Its globs (``exclude``, ``allow``,
``per-file-ignores``) are matched with :func:`fnmatch.fnmatchcase` against
``/``-separated paths relative to that configuration's directory, and never
match a path outside it. A glob without a ``/``
(``build``, ``*_pb2.py``) matches any single path component, as in
``.gitignore``; a glob with one (``src/legacy/*``) matches the relative path
or any of its parent directories, so a directory glob covers everything below
it, like the prefix allow-lists of regex pre-commit scripts.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Sequence

from ._config import ConfigFinder, LintConfig
from ._rules import PARSE_ERROR, RuleSet

# Directories a walk never enters: version control, caches, virtual
# environments by their usual names (any directory holding a ``pyvenv.cfg``
# is skipped too). A path named on the command line is read regardless.
_SKIPPED_DIRS = frozenset(
    {
        ".bzr",
        ".eggs",
        ".git",
        ".hg",
        ".mypy_cache",
        ".nox",
        ".patchscope_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        "__pycache__",
        "__pypackages__",
        "node_modules",
        "venv",
    }
)


class _Globs:
    """A set of globs, split by kind once so matching stays cheap."""

    def __init__(self, patterns: Iterable[str]) -> None:
        patterns = list(patterns)
        self.names = [p for p in patterns if "/" not in p]
        self.paths = [p for p in patterns if "/" in p]

    def __bool__(self) -> bool:
        return bool(self.names or self.paths)

    def match(self, relative: str) -> bool:
        """Whether the ``/``-separated path relative to the globs' root matches.

        A path outside the root (``../x``) never matches: a glob belongs to
        the configuration it is written in.
        """
        if relative == ".." or relative.startswith("../"):
            return False
        parts = [part for part in relative.split("/") if part not in ("", ".")]
        for pattern in self.names:
            if any(fnmatch.fnmatchcase(part, pattern) for part in parts):
                return True
        for pattern in self.paths:
            for end in range(1, len(parts) + 1):
                if fnmatch.fnmatchcase("/".join(parts[:end]), pattern):
                    return True
        return False


class _Compiled:
    """One configuration's globs, compiled once per run."""

    def __init__(self, config: LintConfig) -> None:
        self.config = config
        self.exclude = _Globs(config.exclude)
        self.allow = _Globs(config.allow)
        self.per_file = [
            (_Globs([glob]), frozenset(codes)) for glob, codes in config.per_file_ignores
        ]

    def relative(self, path: str) -> str:
        return os.path.relpath(path, self.config.root).replace(os.sep, "/")


class FileSelector:
    """Decides, per path, which settings govern it, whether it is read, what it reports.

    With a ``config``, every path follows it (``--config``); without one,
    each path follows the nearest configuration above it (see
    :class:`ConfigFinder`), or the defaults rooted at the working directory.
    Remembers what it looked up; not thread-safe: one selector per run.
    """

    def __init__(self, config: LintConfig | None = None) -> None:
        """Use ``config`` for every path, or find each path's own (``None``)."""
        self._config = config
        self._finder = ConfigFinder()
        self._defaults = LintConfig(root=os.getcwd())
        self._compiled: dict[LintConfig, _Compiled] = {}
        self._rules: dict[tuple[LintConfig, frozenset[str]], RuleSet] = {}

    def settings(self, path: str) -> LintConfig:
        """The configuration that governs ``path`` (that of the directory holding it)."""
        return self._settings(os.path.abspath(path)).config

    def _settings(self, absolute: str) -> _Compiled:
        config = self._config
        if config is None:
            config = self._finder.nearest(os.path.dirname(absolute)) or self._defaults
        compiled = self._compiled.get(config)
        if compiled is None:
            compiled = self._compiled[config] = _Compiled(config)
        return compiled

    def excluded(self, path: str) -> bool:
        """Whether ``path`` matches an ``exclude`` glob and is not to be read."""
        absolute = os.path.abspath(path)
        compiled = self._settings(absolute)
        return bool(compiled.exclude) and compiled.exclude.match(compiled.relative(absolute))

    def allowed(self, path: str) -> bool:
        """Whether ``path`` matches an ``allow`` glob and may use ``torch.cuda``."""
        absolute = os.path.abspath(path)
        compiled = self._settings(absolute)
        return bool(compiled.allow) and compiled.allow.match(compiled.relative(absolute))

    def rules(self, path: str) -> RuleSet:
        """What ``path`` reports: its settings' codes less its ``per-file-ignores``.

        An allowed file reports ``PS000`` only (it is still parsed, so a
        syntax error there is found).
        """
        absolute = os.path.abspath(path)
        compiled = self._settings(absolute)
        config = compiled.config
        codes = config.codes
        if compiled.allow or compiled.per_file:
            relative = compiled.relative(absolute)
            if compiled.allow and compiled.allow.match(relative):
                codes = codes & {PARSE_ERROR}
            for globs, ignored in compiled.per_file:
                if globs.match(relative):
                    codes = codes - ignored
        key = (config, codes)
        rules = self._rules.get(key)
        if rules is None:
            rules = self._rules[key] = config.rules(codes)
        return rules

    def collect(self, paths: Sequence[str]) -> list[str]:
        """The files to read for the command-line ``paths``, in a stable order.

        A directory is walked for ``*.py`` files; a file is read whatever its
        name (pre-commit passes extensionless scripts with a Python shebang).
        A path that does not exist is kept, so that checking it reports it
        (``PS000``) while the other paths are still linted.
        """
        seen: set[str] = set()
        files = []
        for path in paths:
            if not os.path.lexists(path):
                if path not in seen:
                    seen.add(path)
                    files.append(path)
                continue
            if self.excluded(path):
                continue
            found = self._walk(path) if os.path.isdir(path) else iter([path])
            for file in found:
                key = os.path.normpath(os.path.abspath(file))
                if key not in seen:
                    seen.add(key)
                    files.append(os.path.normpath(file))
        return files

    def _walk(self, directory: str) -> Iterator[str]:
        with os.scandir(directory) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if (
                    entry.name in _SKIPPED_DIRS
                    or os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))
                    or self.excluded(entry.path)
                ):
                    continue
                yield from self._walk(entry.path)
            elif entry.name.endswith(".py") and entry.is_file() and not self.excluded(entry.path):
                yield entry.path
