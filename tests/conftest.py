"""Shared test configuration.

Hypothesis profiles: "ci" (the default, and what CI runs) draws a fixed,
derandomized set of examples so every run tests the same cases; "dev" draws
more. Choose one with ``HYPOTHESIS_PROFILE=dev``.
"""

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=60, derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
