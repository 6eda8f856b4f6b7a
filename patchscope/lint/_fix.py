"""``--fix`` and ``--diff``: rewrite the findings whose replacement means the same everywhere.

Only the calls in :data:`FIXES` are rewritten, and only when they are
spelled ``torch.cuda.NAME()`` with the name ``torch`` bound to the torch
module (the checker resolved it so) and called without arguments: an
argument may name a CUDA device (``synchronize("cuda:1")``), which the
device-generic call would then be asked about on an XPU machine. The span
rewritten is the call's function, taken from the syntax tree, so comments
and string literals are never touched, and a rewritten call is no longer a
finding, so a second run changes nothing. :data:`REFUSED` lists the
findings that are never rewritten, with the reason.
"""

from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from collections.abc import Iterable, Mapping, Sequence

from ._finding import Finding

#: Rewrites that keep the call's meaning on every device: the API, the
#: replacement, and why it is safe.
FIXES: Mapping[str, tuple[str, str]] = {
    "torch.cuda.synchronize": (
        "torch.accelerator.synchronize",
        "waits for all work on the current device; on a CUDA build the current "
        "accelerator is the current CUDA device, elsewhere it is that device's",
    ),
    "torch.cuda.empty_cache": (
        "torch.accelerator.empty_cache",
        "releases the caching allocator's unused blocks of the current accelerator, "
        "the CUDA allocator on a CUDA build",
    ),
    "torch.cuda.device_count": (
        "torch.accelerator.device_count",
        "counts the devices of the accelerator in use; on a CUDA build, the CUDA devices",
    ),
    "torch.cuda.current_device": (
        "torch.accelerator.current_device_index",
        "the index of the current device of the accelerator in use, an int either way",
    ),
    "torch.cuda.memory_allocated": (
        "torch.accelerator.memory_allocated",
        "bytes held by tensors on the current device, read from the same allocator statistics",
    ),
    "torch.cuda.memory_reserved": (
        "torch.accelerator.memory_reserved",
        "bytes the caching allocator holds on the current device, from the same statistics",
    ),
    "torch.cuda.max_memory_allocated": (
        "torch.accelerator.max_memory_allocated",
        "the peak of memory_allocated on the current device, from the same statistics",
    ),
    "torch.cuda.max_memory_reserved": (
        "torch.accelerator.max_memory_reserved",
        "the peak of memory_reserved on the current device, from the same statistics",
    ),
    "torch.cuda.reset_peak_memory_stats": (
        "torch.accelerator.reset_peak_memory_stats",
        "resets the same peak counters of the current device",
    ),
    "torch.cuda.memory_stats": (
        "torch.accelerator.memory_stats",
        "the current device's allocator statistics, as the same dict of counters",
    ),
}

#: Findings that are never rewritten, and why the obvious rewrite is wrong.
REFUSED: Mapping[str, str] = {
    "torch.cuda.Event": (
        "torch.Event is not what code that redirects torch.cuda.Event (an XPU shim, "
        "patchscope.torch.device_events()) intercepts, and its keyword arguments differ; "
        "the rewrite broke XPU once"
    ),
    "torch.cuda.Stream": (
        "torch.Stream takes a device, not a CUDA priority and stream handle, and is not "
        "what a redirect of torch.cuda.Stream intercepts"
    ),
    "torch.cuda.current_stream": (
        "torch.accelerator.current_stream() returns a torch.Stream, not a torch.cuda.Stream "
        "with its CUDA-only methods"
    ),
    "torch.cuda.set_device": (
        "the argument may be a CUDA device ('cuda:1'), which set_device_index refuses "
        "elsewhere; rewrite it by hand"
    ),
    "torch.cuda.manual_seed_all": (
        "torch.manual_seed() also reseeds the CPU generator, which changes every later "
        "CPU random number"
    ),
    "torch.cuda.manual_seed": (
        "torch.manual_seed() reseeds the CPU and every device, not only the current CUDA one"
    ),
    "torch.cuda.get_device_capability": (
        "torch.accelerator.get_device_capability() returns a dict of supported dtypes, "
        "not a (major, minor) pair"
    ),
    "torch.cuda.mem_get_info": (
        "torch.accelerator.get_memory_info() is not available on every accelerator build; "
        "rewrite it where the project supports it"
    ),
}

_NEWLINE = re.compile(r"\r\n|\r|\n")


def fixable(finding: Finding) -> bool:
    """Whether ``finding`` is of an API that :data:`FIXES` may rewrite."""
    return finding.api in FIXES


def fix_source(data: bytes, findings: Iterable[Finding]) -> tuple[bytes, int]:
    """``data`` with the fixable ``findings`` rewritten, and how many were.

    ``findings`` are those reported for this file (after suppressions), so a
    suppressed call is left as it is. Newlines, encoding and every byte
    outside the rewritten spans are kept. Pure function.
    """
    wanted = {(f.line, f.column, f.api) for f in findings if fixable(f)}
    if not wanted:
        return data, 0
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
        tree = ast.parse(data)
    except (SyntaxError, UnicodeDecodeError, ValueError, LookupError):
        return data, 0
    pieces = _NEWLINE.split(text)
    ends = _NEWLINE.findall(text)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.args or node.keywords:
            continue
        func = node.func
        if func.end_lineno != func.lineno or func.end_col_offset is None:
            continue
        api = _spelled(func)
        if api is None or api not in FIXES:
            continue
        line = pieces[func.lineno - 1]
        start = len(line.encode()[: func.col_offset].decode(errors="replace"))
        end = len(line.encode()[: func.end_col_offset].decode(errors="replace"))
        if (func.lineno, start + 1, api) in wanted:
            edits.setdefault(func.lineno, []).append((start, end, FIXES[api][0]))
    count = 0
    for number, spans in edits.items():
        line = pieces[number - 1]
        for start, end, replacement in sorted(spans, reverse=True):
            line = line[:start] + replacement + line[end:]
            count += 1
        pieces[number - 1] = line
    if not count:
        return data, 0
    joined = "".join(piece + end for piece, end in zip(pieces, [*ends, ""], strict=True))
    return joined.encode(encoding), count


def _spelled(func: ast.expr) -> str | None:
    """``torch.cuda.NAME`` when ``func`` is literally spelled so, else ``None``."""
    if not isinstance(func, ast.Attribute):
        return None
    inner = func.value
    if not (isinstance(inner, ast.Attribute) and inner.attr == "cuda"):
        return None
    root = inner.value
    if not (isinstance(root, ast.Name) and root.id == "torch"):
        return None
    return f"torch.cuda.{func.attr}"


def unified_diff(path: str, before: bytes, after: bytes) -> str:
    """The change as a unified diff of ``path`` (``a/`` and ``b/`` prefixes)."""
    old = before.decode("utf-8", errors="replace").splitlines(keepends=True)
    new = after.decode("utf-8", errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def by_path(findings: Sequence[Finding]) -> dict[str, list[Finding]]:
    """The fixable findings grouped by file, in report order."""
    grouped: dict[str, list[Finding]] = {}
    for finding in findings:
        if fixable(finding):
            grouped.setdefault(finding.path, []).append(finding)
    return grouped
