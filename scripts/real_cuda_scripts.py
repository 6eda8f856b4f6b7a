"""Run CUDA-written training scripts, unmodified, under ``transfer_to_device()``.

Each script in ``scripts/cuda_scripts/`` is written in the shape of a real
third-party one (nanoGPT's ``train.py``, pytorch/examples' DDP tutorial and
tensor-parallel example, a script that imports torch's functions by name
first) and is not changed to run here. Each runs in a fresh interpreter, twice:

* without the scope, as torch runs it (on a CPU-only torch it fails);
* under the scope, in one of two shapes: the whole script run inside
  ``with transfer_to_device(device_count=N):`` (``runpy``), or the script
  imported first and its ``main()`` called inside the scope, as a decorated
  ``main()`` is, with the script's imports already made.

Prints one line per script and run, and exits non-zero when a script fails
under the scope or does not print its result.

    python scripts/real_cuda_scripts.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

SCRIPTS_DIR = Path(__file__).resolve().parent / "cuda_scripts"
TIMEOUT_S = 300


class Script(NamedTuple):
    name: str
    #: "whole": the whole script runs inside the scope; "imports first": the
    #: script is imported outside it, then its main() is called inside it.
    shape: str
    #: what the scope's torch.cuda.device_count() answers on the CPU
    device_count: int
    #: a line the script prints when it ran to the end
    result: str


SCRIPTS = (
    Script("nanogpt_train", "whole", 1, r"^dtype \w+ loss .* -> "),
    Script("ddp_spawn", "whole", 2, r"^ranks 2 device 0 loss .* -> "),
    Script("tensor_parallel", "whole", 2, r"^tp 2 losses \["),
    Script("imports_first", "imports first", 1, r"^on .*: loss "),
)

# What the fresh interpreter runs: argv is [path, shape, device_count].
_RUNNER = """
import runpy, sys
path, shape, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
if shape == "none":
    runpy.run_path(path, run_name="__main__")
    raise SystemExit(0)
from patchscope.torch import transfer_to_device
scope = transfer_to_device(device_count=count)
if shape == "whole":
    with scope:
        runpy.run_path(path, run_name="__main__")
else:
    names = runpy.run_path(path, run_name="cuda_script")
    scope(names["main"])()
"""


class Outcome(NamedTuple):
    ran: bool
    seconds: float
    detail: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return int(sock.getsockname()[1])


def run(script: Script, shape: str) -> Outcome:
    """Run ``script`` in a fresh interpreter: ``shape`` "none" runs it without the scope."""
    path = SCRIPTS_DIR / f"{script.name}.py"
    env = {**os.environ, "MASTER_PORT": str(_free_port())}
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(path), shape, str(script.device_count)],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Outcome(False, time.perf_counter() - started, f"timed out after {TIMEOUT_S} s")
    seconds = time.perf_counter() - started
    result = next(
        (line for line in done.stdout.splitlines() if re.search(script.result, line)), None
    )
    if done.returncode == 0 and result is not None:
        return Outcome(True, seconds, result)
    errors = [line for line in done.stderr.splitlines() if re.match(r"\w*(Error|Exception)", line)]
    said = done.stdout.strip().splitlines() or ["without printing its result"]
    last = errors[-1] if errors else said[-1]
    return Outcome(False, seconds, f"exit {done.returncode}: {last}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these scripts")
    args = parser.parse_args(argv)
    chosen = [s for s in SCRIPTS if args.only is None or s.name in args.only]
    if not chosen:
        parser.error(f"no script named {args.only}; there are {[s.name for s in SCRIPTS]}")
    failed = []
    for script in chosen:
        for shape in ("none", script.shape):
            outcome = run(script, shape)
            label = "without the scope" if shape == "none" else f"in the scope ({shape})"
            status = "runs" if outcome.ran else "fails"
            print(
                f"{script.name:16} {label:30} {status:5} {outcome.seconds:5.1f} s  "
                f"{outcome.detail}",
                flush=True,
            )
            if shape != "none" and not outcome.ran:
                failed.append(script.name)
    print(f"{len(chosen) - len(failed)} of {len(chosen)} run under transfer_to_device()")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
