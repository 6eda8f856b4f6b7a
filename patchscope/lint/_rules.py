"""The rule table: which ``torch.cuda`` APIs are reported, under which code.

Every rule names a family of CUDA-only APIs and, per API, the device-generic
replacement that its message recommends. The table is data; the checker in
``_checker.py`` only asks :meth:`RuleSet.match` whether a resolved dotted path
names a reported API.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: The module whose attributes the rules describe.
CUDA = "torch.cuda"

#: Code of the finding for a file that cannot be read or parsed.
PARSE_ERROR = "PS000"

#: Code of the findings for APIs that a project adds with ``extend-apis``.
EXTENDED = "PS005"

# ``torch.cuda`` re-exports these submodules' public functions; spelling the
# defining module (``from torch.cuda.memory import empty_cache``) reaches the
# same object, so it is reported like ``torch.cuda.empty_cache``.
_DEFINING_SUBMODULES = frozenset({"memory", "random", "streams"})


@dataclass(frozen=True)
class Rule:
    """One family of CUDA-only APIs, reported under one code.

    ``apis`` maps a name relative to ``torch.cuda`` (an ``fnmatch`` glob such
    as ``memory_*`` is allowed) to what to use instead. Exact names are looked
    up before globs, so a specific suggestion wins over a family-wide one.
    Instances are immutable and safe to share between threads and processes.
    """

    code: str
    summary: str
    apis: Mapping[str, str]


RULES: tuple[Rule, ...] = (
    Rule(
        "PS001",
        "torch.cuda events and streams",
        {
            "Event": "torch.Event or patchscope.torch.device_event_class()",
            "Stream": "torch.Stream",
            "current_stream": "torch.accelerator.current_stream()",
            "stream": "a torch.Stream as a context manager, or torch.accelerator.set_stream()",
            "synchronize": "torch.accelerator.synchronize()",
        },
    ),
    Rule(
        "PS002",
        "torch.cuda memory management",
        {
            "empty_cache": "torch.accelerator.empty_cache()",
            "mem_get_info": "torch.accelerator.get_memory_info()",
            "memory_allocated": "torch.accelerator.memory_allocated()",
            "memory_reserved": "torch.accelerator.memory_reserved()",
            "memory_stats": "torch.accelerator.memory_stats()",
            "max_memory_allocated": "torch.accelerator.max_memory_allocated()",
            "max_memory_reserved": "torch.accelerator.max_memory_reserved()",
            "reset_peak_memory_stats": "torch.accelerator.reset_peak_memory_stats()",
            "memory_*": "torch.accelerator.memory_stats()",
            "max_memory_*": "torch.accelerator.max_memory_allocated() or max_memory_reserved()",
        },
    ),
    Rule(
        "PS003",
        "torch.cuda device selection",
        {
            "set_device": "torch.accelerator.set_device_index()",
            "device": "torch.accelerator.device_index()",
            "current_device": "torch.accelerator.current_device_index()",
            "device_count": "torch.accelerator.device_count()",
        },
    ),
    Rule(
        "PS004",
        "torch.cuda seeding",
        {
            "manual_seed": "torch.manual_seed(), which seeds every device",
            "manual_seed_all": "torch.manual_seed(), which seeds every device",
        },
    ),
)

#: What ``--statistics`` prints next to each code.
SUMMARIES: Mapping[str, str] = {
    PARSE_ERROR: "file could not be parsed",
    **{rule.code: rule.summary for rule in RULES},
    EXTENDED: "torch.cuda APIs added by extend-apis",
}

#: Every code the linter can report, in order.
CODES: tuple[str, ...] = tuple(SUMMARIES)


@dataclass(frozen=True)
class Match:
    """A reported API: its canonical dotted name, code and message.

    ``depth`` is how many attribute names after ``torch.cuda`` the API spans in
    the path that was matched, so the checker can point at exactly that part
    of a longer chain (``torch.cuda.Event`` in ``torch.cuda.Event().record``).
    """

    api: str
    code: str
    message: str
    depth: int


class RuleSet:
    """The selected rules plus a project's ``extend-apis``, ready for matching.

    Built once per run in the main process and pickled to the workers;
    matching only reads it, so one instance is safe to use from any thread.
    """

    def __init__(self, select: Iterable[str], extend_apis: Iterable[str] = ()) -> None:
        """Keep the rules whose code is in ``select``; add ``extend_apis`` as PS005."""
        selected = frozenset(select)
        table: list[tuple[str, str, str]] = []  # (pattern, code, suggestion)
        for rule in RULES:
            if rule.code in selected:
                table.extend((pattern, rule.code, use) for pattern, use in rule.apis.items())
        if EXTENDED in selected:
            table.extend((pattern, EXTENDED, "") for pattern in extend_apis)
        self.codes = selected
        self._exact: dict[str, tuple[str, str]] = {}
        self._globs: list[tuple[str, str, str]] = []
        for pattern, code, use in table:
            if any(ch in pattern for ch in "*?["):
                self._globs.append((pattern, code, use))
            else:
                self._exact.setdefault(pattern, (code, use))

    def __bool__(self) -> bool:
        """Whether any API can be reported at all (else files need no walk)."""
        return bool(self._exact or self._globs)

    def match(self, path: str) -> Match | None:
        """The shortest prefix of the dotted ``path`` that names a reported API.

        ``path`` is fully resolved (``torch.cuda.memory.empty_cache``, never an
        alias); ``None`` when no part of it below ``torch.cuda`` is reported.
        """
        if not path.startswith(CUDA + "."):
            return None
        parts = path[len(CUDA) + 1 :].split(".")
        found = self._match_parts(parts)
        if found is None and len(parts) > 1 and parts[0] in _DEFINING_SUBMODULES:
            found = self._match_parts(parts[1:])
            if found is not None:
                found = Match(found.api, found.code, found.message, found.depth + 1)
        return found

    def _match_parts(self, parts: list[str]) -> Match | None:
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            hit = self._exact.get(name)
            if hit is None:
                hit = next(
                    (
                        (code, use)
                        for pattern, code, use in self._globs
                        if fnmatch.fnmatchcase(name, pattern)
                    ),
                    None,
                )
            if hit is not None:
                code, use = hit
                api = f"{CUDA}.{name}"
                if code == EXTENDED:
                    message = f"{api} is listed in extend-apis; use a device-generic API"
                else:
                    message = f"{api} is CUDA-only; use {use}"
                return Match(api, code, message, depth)
        return None
