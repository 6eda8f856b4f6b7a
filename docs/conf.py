"""Sphinx configuration of the patchscope documentation.

Build it (warnings are errors, as in CI):

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sphinx.application import Sphinx

# Document the pure-Python twins: they are the reference implementation, and
# with the C accelerator some methods (``Activation.stop``) come from C base
# classes that autodoc does not list. The behaviour is the same either way.
os.environ["PATCHSCOPE_PURE_PYTHON"] = "1"

import patchscope

project = "patchscope"
author = "The patchscope authors"
copyright = "2026, The patchscope authors"
release = patchscope.__version__
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_generated"]

# Markdown: ```{directive}``` blocks, `:::` fences, and anchors for headings
# down to ### so pages can link to each other's sections.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# patchscope.torch imports torch when it is imported (by design: see its
# docstring). The reference is built from the real modules with torch
# replaced by Sphinx's stand-in, so building the docs needs no torch; the
# signatures are unaffected (every module uses `from __future__ import
# annotations`). Listed modules are mocked even where torch is installed, so
# the output is the same in every environment.
autodoc_mock_imports = ["torch"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"

# Names the reference mentions but does not document: the standard library,
# pytest, hypothesis and torch have their own documentation, which an offline
# build cannot link to.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(torch|pytest|_pytest|hypothesis)\..*"),
    (r"py:.*", r"(ast|collections\.abc|contextlib|contextvars|os|threading|warnings)(\..*)?"),
    # The ``scope`` parameters' ``Literal["context", "process"]`` alias.
    (r"py:class", r"Scope"),
]

html_theme = "furo"
html_title = f"patchscope {release}"
html_static_path: list[str] = []

DOCS = Path(__file__).parent


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)


def _generate(app: Sphinx) -> None:
    """Write ``patchscope lint --help`` for the CLI reference, so it never goes stale."""
    env = dict(os.environ, COLUMNS="88")
    result = subprocess.run(
        [sys.executable, "-m", "patchscope", "lint", "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    _write_if_changed(DOCS / "_generated" / "lint-help.txt", result.stdout)


def setup(app: Sphinx) -> None:
    app.connect("builder-inited", _generate)
