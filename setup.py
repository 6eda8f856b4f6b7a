"""Build script: metadata lives in setup.cfg.

The C accelerator is optional: where it cannot be compiled (no compiler, an
interpreter other than CPython) the package installs without it and runs the
same code in pure Python (see patchscope/_records.py).
"""

import platform

from setuptools import Extension, setup

ext_modules = []
if platform.python_implementation() == "CPython":
    ext_modules.append(
        Extension("patchscope._speedups", ["patchscope/_speedups.c"], optional=True)
    )

setup(ext_modules=ext_modules)
