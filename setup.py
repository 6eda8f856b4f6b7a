"""Build script: metadata lives in setup.cfg.

The C accelerator is optional: where it cannot be compiled (no compiler, an
interpreter other than CPython 3.10-3.15 with the GIL) the package builds
without it, prints one warning saying so, and runs the same code in pure
Python (see patchscope/_accel.py). A wheel built that way is tagged
py3-none-any: a platform tag on a wheel without the extension would claim
what it does not hold.

PATCHSCOPE_REQUIRE_ACCELERATOR=1 turns the fallback into a build error;
release builds set it.
"""

import glob
import os
import platform
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import BaseError, CCompilerError

# Read as patchscope/_accel.py reads PATCHSCOPE_PURE_PYTHON: these mean off.
OFF = {"", "0", "false", "no", "off"}
REQUIRE_ACCELERATOR = (
    os.environ.get("PATCHSCOPE_REQUIRE_ACCELERATOR", "").strip().lower() not in OFF
)


def unsupported_interpreter():
    """Why the C code cannot be built for this interpreter, or None."""
    # The versions the C code is written and tested for; free-threaded builds
    # get the pure-Python code (the C code relies on the GIL).
    if platform.python_implementation() != "CPython":
        return f"it needs CPython, this is {platform.python_implementation()}"
    if not (3, 10) <= sys.version_info < (3, 16):
        return f"it supports CPython 3.10 to 3.15, this is {platform.python_version()}"
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return "it needs the GIL, this is a free-threaded build"
    return None


class build_accelerator(build_ext):
    """build_ext that falls back to pure Python loudly, or fails when told to."""

    def build_extension(self, ext):
        reason = unsupported_interpreter()
        fix = "build with CPython 3.10 to 3.15 (not free-threaded)"
        if reason is None:
            try:
                super().build_extension(ext)
                return
            except (CCompilerError, BaseError) as error:
                reason = f"compiling it failed: {str(error).rstrip('.')}"
                fix = "install a C compiler and the Python headers"
        if REQUIRE_ACCELERATOR:
            raise BaseError(
                f"patchscope: cannot build the C accelerator {ext.name}: {reason}. "
                f"PATCHSCOPE_REQUIRE_ACCELERATOR=1 makes this an error: {fix}, or unset "
                "it to build the pure-Python package."
            )
        print(
            f"warning: patchscope: the C accelerator {ext.name} was not built ({reason}); "
            "patchscope will run in pure Python, with the same behaviour but slower, and "
            "a wheel built now is tagged py3-none-any. Set PATCHSCOPE_REQUIRE_ACCELERATOR=1 "
            "to make this an error.",
            file=sys.stderr,
            flush=True,
        )
        # A build from an earlier run would be packaged, or imported by an
        # editable install, as if it were this one.
        filename = self.get_ext_filename(self.get_ext_fullname(ext.name))
        stale = [os.path.join(self.build_lib, filename)]
        if self.editable_mode:
            package_dir = self.get_finalized_command("build_py").get_package_dir("patchscope")
            stale.append(os.path.join(package_dir, os.path.basename(filename)))
        for path in stale:
            if os.path.exists(path):
                os.remove(path)
        # bdist_wheel and install decided before anything was built, from
        # there being an extension at all, that the wheel is a platform wheel
        # installed to platlib; without the extension it is pure.
        self.distribution.ext_modules = []
        wheel = self.distribution.command_obj.get("bdist_wheel")
        if wheel is not None:
            wheel.root_is_pure = True


setup(
    ext_modules=[
        Extension(
            "patchscope._speedups",
            sorted(glob.glob("patchscope/_c/*.c")),
            depends=["patchscope/_c/speedups.h"],
            # build_accelerator reports or raises every failure itself; this
            # lets an editable install go on without the built file.
            optional=not REQUIRE_ACCELERATOR,
        )
    ],
    cmdclass={"build_ext": build_accelerator},
)
