"""Remember each file's findings by its content, so unchanged files are not parsed.

A run's cache lives in ``.patchscope_cache/`` in the directory of the
configuration that governs the files (the working directory for files no
configuration governs), with a ``.gitignore`` inside that keeps it out of
version control, as ruff does with ``.ruff_cache/``. One JSON file holds the
entries for one configuration, named by a digest of everything a file's
findings depend on besides its content: the lint's own code, the Python
version (which decides what parses), and the settings. An entry maps a
file's absolute path to a digest of its bytes and its findings, so a file is
parsed again exactly when its content changed; touching it is free.

Two runs writing one cache at once each replace the file whole (write, then
rename), so neither can leave it torn; one run's new entries may be lost,
which costs a parse next time, never a wrong finding. JSON, not pickle: the
cache sits in the project, and reading it must not run code.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import warnings
from typing import Any

from ._config import LintConfig
from ._finding import Finding

CACHE_DIR = ".patchscope_cache"
_GITIGNORE = "# Written by patchscope lint; the whole directory is a cache.\n*\n"
_FORMAT = 1


def digest(data: bytes) -> str:
    """The key of a file's content."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _lint_version() -> str:
    # The package version, and a digest of the lint's own modules: an
    # editable install changes its rules without changing its version.
    from .. import __version__

    code = hashlib.blake2b(digest_size=16)
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.endswith(".py"):
            with open(os.path.join(here, name), "rb") as stream:
                code.update(stream.read())
    return f"{__version__}-{code.hexdigest()[:12]}"


_Row = list[Any]  # [line, column, code, message, end_line, end_column, api]


class _Store:
    """The entries of one configuration's cache file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: dict[str, list[Any]] = {}
        self.changed = False
        try:
            with open(path, encoding="utf-8") as stream:
                document = json.load(stream)
        except (OSError, ValueError):
            return  # none yet, or unreadable: start afresh
        if isinstance(document, dict) and isinstance(document.get("files"), dict):
            self.entries = document["files"]


class Cache:
    """Findings of files seen before, per configuration; used by one run.

    Not thread-safe; :func:`lint_paths` creates one per run and calls it from
    its own thread only.
    """

    def __init__(self) -> None:
        self._version = _lint_version()
        self._stores: dict[LintConfig, _Store] = {}

    def _store(self, config: LintConfig) -> _Store:
        store = self._stores.get(config)
        if store is None:
            settings = json.dumps(
                [
                    _FORMAT,
                    self._version,
                    sys.implementation.name,
                    sys.version,
                    [getattr(config, name) for name in sorted(config.__dataclass_fields__)],
                ]
            )
            name = hashlib.blake2b(settings.encode(), digest_size=16).hexdigest()
            path = os.path.join(config.root, CACHE_DIR, self._version, name + ".json")
            store = self._stores[config] = _Store(path)
        return store

    def get(self, config: LintConfig, path: str, key: str) -> list[Finding] | None:
        """The findings recorded for ``path`` with content ``key``, if any."""
        entry = self._store(config).entries.get(os.path.abspath(path))
        if not isinstance(entry, list) or len(entry) != 2 or entry[0] != key:
            return None
        try:
            return [Finding(path, *row) for row in entry[1]]
        except TypeError:
            return None  # an entry of another shape: parse the file again

    def put(self, config: LintConfig, path: str, key: str, findings: list[Finding]) -> None:
        """Record ``findings`` for ``path`` with content ``key``."""
        store = self._store(config)
        rows: list[_Row] = [
            [f.line, f.column, f.code, f.message, f.end_line, f.end_column, f.api] for f in findings
        ]
        store.entries[os.path.abspath(path)] = [key, rows]
        store.changed = True

    def save(self) -> None:
        """Write every store that changed; warn (never raise) when one cannot be."""
        for store in self._stores.values():
            if store.changed:
                try:
                    _write(store)
                except OSError as exc:
                    warnings.warn(
                        f"cannot write the cache {store.path}: {exc.strerror or exc}; "
                        "the run is unaffected (pass --no-cache to skip the cache)",
                        RuntimeWarning,
                        stacklevel=3,
                    )


def _write(store: _Store) -> None:
    directory = os.path.dirname(store.path)
    top = os.path.dirname(directory)
    os.makedirs(directory, exist_ok=True)
    ignore = os.path.join(top, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as stream:
            stream.write(_GITIGNORE)
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump({"files": store.entries}, stream, separators=(",", ":"))
        os.replace(temporary, store.path)
    except BaseException:
        os.unlink(temporary)
        raise
