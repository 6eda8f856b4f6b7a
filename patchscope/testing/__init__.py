"""Tools for testing patches: snapshots.

``snapshot(*objects)`` records raw attribute dictionaries and reports what
changed. This module imports neither hypothesis nor pytest.
"""

from ._snapshot import ABSENT, Difference, Snapshot, snapshot

__all__ = [
    "ABSENT",
    "Difference",
    "Snapshot",
    "snapshot",
]
