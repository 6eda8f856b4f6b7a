"""The rule table: which ``torch.cuda`` APIs are reported, under which code.

Every rule names a family of CUDA-only APIs and, per API, the device-generic
replacement that its message recommends. The table is data; the checker in
``_checker.py`` only asks :meth:`RuleSet.match` whether a resolved dotted path
names a reported API.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: The module whose attributes the rules describe.
CUDA = "torch.cuda"

#: Code of the finding for a file that cannot be read or parsed.
PARSE_ERROR = "PS000"

#: Code of the findings for APIs that a project adds with ``extend-apis``.
EXTENDED = "PS005"

#: Codes of hand-written patches of a ``patch-targets`` module (torch.cuda by
#: default): an assignment or ``del``; ``setattr``/``delattr`` and pytest's
#: ``monkeypatch``; ``unittest.mock``'s ``patch`` family; and the
#: save/assign/restore shape (``orig = m.X; m.X = Y; ...; m.X = orig``).
PATCH_ASSIGN = "PS010"
PATCH_SETATTR = "PS011"
PATCH_MOCK = "PS012"
PATCH_RESTORE = "PS013"
PATCH_CODES = frozenset({PATCH_ASSIGN, PATCH_SETATTR, PATCH_MOCK, PATCH_RESTORE})

#: What ``patch-targets`` is by default: torch.cuda and everything below it.
DEFAULT_PATCH_TARGETS: tuple[str, ...] = ("torch.cuda.*",)

#: Code of a ``# patchscope:`` comment that is not a well-formed directive.
MALFORMED_SUPPRESSION = "PS007"

#: Code of a suppression that silences nothing (``--report-unused-suppressions``).
UNUSED_SUPPRESSION = "PS008"

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
            "ExternalStream": (
                "torch.Stream for streams torch creates; a foreign stream handle has no "
                "device-generic wrapper, so keep this behind a device-type check"
            ),
            "StreamContext": "a torch.Stream as a context manager",
            "current_stream": "torch.accelerator.current_stream()",
            "default_stream": (
                "torch.accelerator.current_stream(), the default stream unless one was set"
            ),
            "set_stream": "torch.accelerator.set_stream()",
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
            "reset_accumulated_memory_stats": (
                "torch.accelerator.reset_accumulated_memory_stats()"
            ),
            "reset_max_memory_allocated": "torch.accelerator.reset_peak_memory_stats()",
            "reset_max_memory_cached": "torch.accelerator.reset_peak_memory_stats()",
            "memory_*": "torch.accelerator.memory_stats()",
            "max_memory_*": "torch.accelerator.max_memory_allocated() or max_memory_reserved()",
            "MemPool": (
                "no device-generic memory pool exists; keep it behind a device-type check "
                "(torch.get_device_module() names the active device's module)"
            ),
            "use_mem_pool": (
                "no device-generic memory pool exists; keep it behind a device-type check "
                "(torch.get_device_module() names the active device's module)"
            ),
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
            "get_device_capability": (
                "torch.accelerator.get_device_capability() (a dict of supported dtypes, "
                "not a (major, minor) pair)"
            ),
            "get_device_properties": "torch.accelerator.get_device_capability()",
            "get_device_name": "torch.accelerator.current_accelerator() for the device type",
        },
    ),
    Rule(
        "PS004",
        "torch.cuda seeding",
        {
            "manual_seed": "torch.manual_seed(), which seeds every device",
            "manual_seed_all": "torch.manual_seed(), which seeds every device",
            "get_rng_state": "torch.get_device_module().get_rng_state()",
            "set_rng_state": "torch.get_device_module().set_rng_state()",
            "get_rng_state_all": "torch.get_device_module().get_rng_state_all()",
            "set_rng_state_all": "torch.get_device_module().set_rng_state_all()",
        },
    ),
    Rule(
        "PS006",
        "torch.cuda graphs",
        {
            "CUDAGraph": "torch.accelerator.Graph",
            "graph": "torch.accelerator.Graph as a context manager",
            "make_graphed_callables": (
                "torch.accelerator.Graph, capturing and replaying by hand (there is no "
                "device-generic make_graphed_callables)"
            ),
            "is_current_stream_capturing": (
                "torch.get_device_module().is_current_stream_capturing(), on the devices "
                "that capture graphs"
            ),
        },
    ),
    Rule(
        "PS009",
        "torch.cuda profiling ranges (NVTX)",
        {
            "nvtx": ("torch.profiler.record_function(), which every device's profiler records"),
        },
    ),
)

#: What ``--statistics`` prints next to each code, in code order.
SUMMARIES: Mapping[str, str] = dict(
    sorted(
        {
            PARSE_ERROR: "file could not be parsed",
            **{rule.code: rule.summary for rule in RULES},
            EXTENDED: "torch.cuda APIs added by extend-apis",
            PATCH_ASSIGN: "hand-written patch: assignment or del of a module attribute",
            PATCH_SETATTR: "hand-written patch: setattr, delattr or monkeypatch",
            PATCH_MOCK: "hand-written patch: unittest.mock patch, patch.object, patch.dict",
            PATCH_RESTORE: "hand-written patch: save, assign and restore by hand",
            MALFORMED_SUPPRESSION: "malformed suppression comment",
            UNUSED_SUPPRESSION: "suppression that silences nothing",
        }.items()
    )
)

#: Every code the linter can report, in order.
CODES: tuple[str, ...] = tuple(SUMMARIES)


# The prefilter's patterns (see RuleSet): ``.cuda`` not called, and
# ``from torch import ..., cuda`` (parenthesized lists may span lines).
_DOT_CUDA = re.compile(rb"\.cuda\b(?!\s*\()")
_FROM_TORCH_CUDA = re.compile(rb"from\s+torch\s+import\s*\(?[^)]*?\bcuda\b", re.S)


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

    ``codes`` are the codes a file may report (rule families, and also
    ``PS000``, ``PS007`` and ``PS008``, which the checker reports itself);
    APIs matching an ``allow_apis`` name or glob are never reported. Built
    once per distinct setting in the main process and pickled to the workers;
    matching only reads it, so one instance is safe to use from any thread.
    """

    def __init__(
        self,
        select: Iterable[str],
        extend_apis: Iterable[str] = (),
        allow_apis: Iterable[str] = (),
        *,
        patch_targets: Iterable[str] = DEFAULT_PATCH_TARGETS,
        skip_annotations: bool = False,
        suppression_comments: Iterable[str] = (),
    ) -> None:
        """Keep the rules whose code is in ``select``; add ``extend_apis`` as PS005.

        ``patch_targets`` are the modules whose hand-written patches PS010 to
        PS013 report (``m`` for ``m`` itself, ``m.*`` for ``m`` and everything
        below it); ``skip_annotations`` leaves type annotations unchecked;
        ``suppression_comments`` are extra comment markers (``ignore-cuda``)
        that silence every finding on their line.
        """
        selected = frozenset(select)
        self.patch_targets = tuple(patch_targets) if selected & PATCH_CODES else ()
        self.skip_annotations = skip_annotations
        self.suppression_comments = tuple(suppression_comments)
        table: list[tuple[str, str, str]] = []  # (pattern, code, suggestion)
        for rule in RULES:
            if rule.code in selected:
                table.extend((pattern, rule.code, use) for pattern, use in rule.apis.items())
        if EXTENDED in selected:
            table.extend((pattern, EXTENDED, "") for pattern in extend_apis)
        self.codes = selected
        self._allowed = tuple(allow_apis)
        self._exact: dict[str, tuple[str, str]] = {}
        self._globs: list[tuple[str, str, str]] = []
        for pattern, code, use in table:
            if any(ch in pattern for ch in "*?["):
                self._globs.append((pattern, code, use))
            else:
                self._exact.setdefault(pattern, (code, use))

        # The prefilter: a file that matches none of these cannot have a
        # finding of the selected rules, so it is not parsed. Every way to
        # reach torch.cuda spells ``.cuda`` not followed by ``(`` (an
        # attribute, ``import torch.cuda``, a string target such as
        # ``"torch.cuda.Event"``; ``x.cuda()`` is a tensor method), or is
        # ``from torch import cuda``. A patch of another target names the
        # target's top-level package; a suppression comment is judged (used
        # or not) only in a parsed file.
        self._cuda = bool(self._exact or self._globs) or any(
            target.startswith(CUDA) for target in self.patch_targets
        )
        words = {root.encode() for root in self.patch_roots_of(self.patch_targets)}
        words.add(b"patchscope:")
        self._words = tuple(sorted(words))
        self.needles = ((b".cuda", b"from torch import cuda") if self._cuda else ()) + self._words
        # The top-level names whose bindings the checker tracks for patches.
        self.patch_roots = self.patch_roots_of(self.patch_targets)

    def __bool__(self) -> bool:
        """Whether anything can be reported at all (else files need no walk)."""
        return bool(self._exact or self._globs or self.patch_targets)

    def wanted(self, data: bytes) -> bool:
        """Whether a file's bytes can hold a finding at all: the prefilter."""
        if (
            self._cuda
            and b"cuda" in data
            and (_DOT_CUDA.search(data) is not None or _FROM_TORCH_CUDA.search(data) is not None)
        ):
            return True
        return any(word in data for word in self._words)

    @staticmethod
    def patch_roots_of(targets: Iterable[str]) -> frozenset[str]:
        """The top-level packages of ``targets`` other than torch."""
        return frozenset(target.split(".")[0] for target in targets) - {"torch"}

    def patched(self, owner: str) -> bool:
        """Whether setting an attribute of the dotted ``owner`` is a reported patch."""
        for target in self.patch_targets:
            if target.endswith(".*"):
                base = target[:-2]
                if owner == base or owner.startswith(base + "."):
                    return True
            elif owner == target:
                return True
        return False

    def match(self, path: str) -> Match | None:
        """The shortest prefix of the dotted ``path`` that names a reported API.

        ``path`` is fully resolved (``torch.cuda.memory.empty_cache``, never an
        alias); ``None`` when no part of it below ``torch.cuda`` is reported,
        or when that part is listed in ``allow_apis``.
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
                if any(fnmatch.fnmatchcase(name, allowed) for allowed in self._allowed):
                    return None
                code, use = hit
                api = f"{CUDA}.{name}"
                if code == EXTENDED:
                    message = f"{api} is listed in extend-apis; use a device-generic API"
                else:
                    message = f"{api} is CUDA-only; use {use}"
                return Match(api, code, message, depth)
        return None


def known_api(name: str, extend_apis: Iterable[str] = ()) -> bool:
    """Whether the name or glob ``name`` covers an API some rule reports.

    Used to refuse ``allow-apis`` entries that would silence nothing (a typo
    such as ``Evnt``): ``name`` must match a table entry, or be matched by a
    glob of the table (``memory_stats`` by ``memory_*``).
    """
    patterns = [api for rule in RULES for api in rule.apis]
    patterns += list(extend_apis)
    return any(
        fnmatch.fnmatchcase(pattern, name) or fnmatch.fnmatchcase(name, pattern)
        for pattern in patterns
    )
