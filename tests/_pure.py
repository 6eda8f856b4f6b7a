"""A second, pure-Python copy of the core in this process, for differential tests.

:func:`load` imports the package's files again under another top-level name
(``patchscope_pure``) with ``PATCHSCOPE_PURE_PYTHON=1`` set only while they
are imported. Relative imports inside the package then resolve to the copy,
so it has its own registry, lock, slot classes and caches: a complete, real
pure-Python build, beside the ``patchscope`` that the C accelerator runs.

``PATCHSCOPE_PARITY_SOURCE`` (a directory holding a copy of the package's
``.py`` files) makes the copy load from there instead: a mutated copy runs as
the pure-Python build while ``patchscope`` itself stays as it is.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

import patchscope

NAME = "patchscope_pure"


def load() -> types.ModuleType:
    """The pure-Python copy of the package (imported once, then reused)."""
    if NAME in sys.modules:
        return sys.modules[NAME]
    source = os.environ.get("PATCHSCOPE_PARITY_SOURCE") or str(Path(patchscope.__file__).parent)
    spec = importlib.util.spec_from_file_location(
        NAME, os.path.join(source, "__init__.py"), submodule_search_locations=[source]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = os.environ.get("PATCHSCOPE_PURE_PYTHON")
    os.environ["PATCHSCOPE_PURE_PYTHON"] = "1"
    sys.modules[NAME] = module
    try:
        spec.loader.exec_module(module)
        # The package binds its public names on first access: make that
        # happen while the switch is set, so the copy's core is pure Python.
        module.__getattr__("ACCELERATED")
    except BaseException:
        for name in [n for n in sys.modules if n == NAME or n.startswith(NAME + ".")]:
            del sys.modules[name]
        raise
    finally:
        if saved is None:
            del os.environ["PATCHSCOPE_PURE_PYTHON"]
        else:
            os.environ["PATCHSCOPE_PURE_PYTHON"] = saved
    assert not module.ACCELERATED
    return module
