"""Tools for testing patches: snapshots.

``snapshot(*objects)`` records raw attribute dictionaries and reports what
changed. This module imports neither hypothesis nor pytest.
"""

from .._resolve import ABSENT
from ._snapshot import Difference, Snapshot, snapshot

__all__ = [
    "ABSENT",
    "Difference",
    "Snapshot",
    "snapshot",
]
