"""Which files a run reads: directory walks, excludes and the allow-list.

Globs are matched with :func:`fnmatch.fnmatchcase` against ``/``-separated
paths relative to the configuration's directory. A glob without a ``/``
(``build``, ``*_pb2.py``) matches any single path component, as in
``.gitignore``; a glob with one (``src/legacy/*``) matches the relative path
or any of its parent directories, so a directory glob covers everything below
it, like the prefix allow-lists of regex pre-commit scripts.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Sequence

from ._config import LintConfig

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
        parts = [part for part in relative.split("/") if part not in ("", ".", "..")]
        for pattern in self.names:
            if any(fnmatch.fnmatchcase(part, pattern) for part in parts):
                return True
        for pattern in self.paths:
            for end in range(1, len(parts) + 1):
                if fnmatch.fnmatchcase("/".join(parts[:end]), pattern):
                    return True
        return False


class FileSelector:
    """Applies a configuration's ``exclude`` and ``allow`` globs to paths.

    Holds no mutable state after construction; safe to share between threads.
    """

    def __init__(self, config: LintConfig) -> None:
        """Compile ``config``'s globs, relative to ``config.root``."""
        self.root = config.root
        self._exclude = _Globs(config.exclude)
        self._allow = _Globs(config.allow)

    def _relative(self, path: str) -> str:
        return os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")

    def excluded(self, path: str) -> bool:
        """Whether ``path`` matches an ``exclude`` glob and is not to be read."""
        return bool(self._exclude) and self._exclude.match(self._relative(path))

    def allowed(self, path: str) -> bool:
        """Whether ``path`` matches an ``allow`` glob and may use ``torch.cuda``."""
        return bool(self._allow) and self._allow.match(self._relative(path))

    def collect(self, paths: Sequence[str]) -> list[str]:
        """The files to read for the command-line ``paths``, in a stable order.

        A directory is walked for ``*.py`` files; a file is read whatever its
        name (pre-commit passes extensionless scripts with a Python shebang).
        Raises :class:`FileNotFoundError` for a path that does not exist.
        """
        seen: set[str] = set()
        files = []
        for path in paths:
            if not os.path.exists(path):
                raise FileNotFoundError(path)
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
