"""The warning the pytest plugin issues for a leaked patch."""

from __future__ import annotations


class LeakWarning(UserWarning):
    """A test left a patch behind (``--patchscope-leaks=warn``, the default).

    A :class:`UserWarning`, so pytest's warnings summary shows it and
    ``-W error::patchscope.testing.LeakWarning`` turns it into an error.
    """
