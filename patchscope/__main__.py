"""``python -m patchscope SUBCOMMAND``, also installed as the ``patchscope`` script.

Subcommands are imported only when run, so ``patchscope lint`` never imports
the patching core and the core never imports the lint.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

# name -> (module with a ``main(argv) -> int``, one-line description)
_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "lint": ("patchscope.lint", "report hard-coded torch.cuda APIs in Python source"),
}


def _usage() -> str:
    lines = ["usage: patchscope SUBCOMMAND [ARGS ...]", "", "subcommands:"]
    lines += [f"  {name:<10}{about}" for name, (_, about) in sorted(_SUBCOMMANDS.items())]
    lines += ["", "Run 'patchscope SUBCOMMAND --help' for a subcommand's options."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default: ``sys.argv[1:]``) to a subcommand; return its status.

    Exit status 2 for a missing or unknown subcommand, as for any usage error.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        (sys.stdout if args else sys.stderr).write(_usage())
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in _SUBCOMMANDS:
        sys.stderr.write(f"patchscope: error: unknown subcommand {name!r}\n\n{_usage()}")
        return 2
    module = importlib.import_module(_SUBCOMMANDS[name][0])
    run: Callable[[Sequence[str]], int] = module.main
    return run(rest)


if __name__ == "__main__":
    sys.exit(main())
