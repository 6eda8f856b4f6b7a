"""What the lint reports: one :class:`Finding` per use, error or bad comment."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Finding:
    """One reported use, a file that could not be parsed (``PS000``), or a comment.

    ``line`` and ``column`` are 1-based, and ``column`` counts characters (not
    UTF-8 bytes, as ``ast`` does), so editors land on the right spot. ``api``
    is the canonical ``torch.cuda`` name, ``None`` for the codes that report
    no API (``PS000``, ``PS007``, ``PS008``). Immutable; safe to share between
    threads.
    """

    path: str
    line: int
    column: int
    code: str
    message: str
    end_line: int
    end_column: int
    api: str | None = None
