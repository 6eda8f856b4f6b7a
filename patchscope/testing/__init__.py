"""Tools for testing patches: snapshots, restore checks, the pytest fixtures' type.

``snapshot(*objects)`` records raw attribute dictionaries and reports what
changed; ``check_restores(...)`` runs hypothesis-generated schedules of
activations (nested, out of order, across threads, raising inside) and checks
that everything is restored. The strategies themselves live in
:mod:`patchscope.testing.strategies`, which imports hypothesis; this module
imports neither hypothesis nor pytest.
"""

from .._resolve import ABSENT
from ._check import check_restores
from ._fixture import RedirectFixture
from ._leak import LeakWarning
from ._snapshot import Difference, Snapshot, snapshot

__all__ = [
    "ABSENT",
    "Difference",
    "LeakWarning",
    "RedirectFixture",
    "Snapshot",
    "check_restores",
    "snapshot",
]
