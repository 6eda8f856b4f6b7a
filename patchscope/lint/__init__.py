"""``patchscope lint``: find hard-coded ``torch.cuda`` APIs in source code.

The checker parses each file once with :mod:`ast` and resolves import aliases
(``import torch as t``, ``from torch import cuda``,
``from torch.cuda import Event as E``, ``import torch.cuda as tc``, ``t =
torch``), so it neither misses renamed uses nor reports comments and strings.
It also reports hand-written patches of ``torch.cuda`` (or any module listed
in ``patch-targets``) and can rewrite the calls whose device-generic
replacement means the same everywhere (``--fix``). It never imports torch,
``import patchscope`` never imports this package, and this package never
imports the patching core.

Use it from the shell (``patchscope lint src/``), from pre-commit (hook id
``patchscope-lint``) or from Python::

    from patchscope.lint import lint_paths
    result = lint_paths(["src"])
    for finding in result.findings:
        print(finding.path, finding.line, finding.code, finding.message)
"""

from ._cli import main
from ._config import ConfigError, LintConfig, load_config, read_config
from ._finding import Finding
from ._rules import RULES, Rule
from ._run import LintResult, lint_paths, lint_source

__all__ = [
    "RULES",
    "ConfigError",
    "Finding",
    "LintConfig",
    "LintResult",
    "Rule",
    "lint_paths",
    "lint_source",
    "load_config",
    "main",
    "read_config",
]
