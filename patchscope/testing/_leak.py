"""The warning the pytest plugin issues for a leaked patch."""

from __future__ import annotations


class LeakWarning(UserWarning):
    """A test or fixture left a patch behind (``--patchscope-leaks=warn``, the default).

    A :class:`UserWarning`, so pytest's warnings summary shows it and
    ``-W error::patchscope.testing.LeakWarning`` turns it into an error; the
    plugin then undoes the leak, as under ``--patchscope-leaks=error``.
    Instances are immutable once raised; safe to share between threads.
    """


# Tracebacks and `-W` filters use the public name, not the private module.
LeakWarning.__module__ = "patchscope.testing"
