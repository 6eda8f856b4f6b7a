"""Scoped monkey-patching with exact restoration."""

__version__ = "0.1.0"
