"""Build script: metadata lives in setup.cfg.

The C accelerator is optional: where it cannot be compiled (no compiler, an
interpreter other than CPython) the package installs without it and runs the
same code in pure Python (see patchscope/_accel.py).
"""

import glob
import os
import platform
import sys
import sysconfig

from setuptools import Extension, setup

ext_modules = []
# CPython 3.10-3.15 with the GIL: the versions the C code is written and
# tested for. Free-threaded builds get the pure-Python code.
if (
    platform.python_implementation() == "CPython"
    and sys.version_info < (3, 16)
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
):
    ext_modules.append(
        Extension(
            "patchscope._speedups",
            sorted(glob.glob("patchscope/_c/*.c")),
            depends=["patchscope/_c/speedups.h"],
            # PATCHSCOPE_REQUIRE_ACCELERATOR=1: a failed compile fails the build.
            optional=os.environ.get("PATCHSCOPE_REQUIRE_ACCELERATOR", "") in ("", "0"),
        )
    )

setup(ext_modules=ext_modules)
