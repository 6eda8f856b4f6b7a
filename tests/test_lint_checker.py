"""Tests for patchscope.lint._checker: alias resolution, scopes, suppression, PS000."""

from __future__ import annotations

import keyword
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patchscope.lint._checker import Finding, check_file, check_source
from patchscope.lint._rules import CODES, RULES, UNUSED_SUPPRESSION, RuleSet

ALL = RuleSet(CODES)
# What a run reports without --report-unused-suppressions.
DEFAULT = RuleSet(set(CODES) - {UNUSED_SUPPRESSION})


def findings(source: str, rules: RuleSet = DEFAULT) -> list[tuple[int, int, str, str | None]]:
    """(line, column, code, api) of each finding in the dedented ``source``."""
    data = textwrap.dedent(source).encode()
    return [(f.line, f.column, f.code, f.api) for f in check_source(data, "t.py", rules)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            "import torch\ntorch.cuda.Event()\n",
            [(2, 1, "PS001", "torch.cuda.Event")],
            id="import torch",
        ),
        pytest.param(
            "import torch as t\nt.cuda.synchronize()\n",
            [(2, 1, "PS001", "torch.cuda.synchronize")],
            id="import torch as t",
        ),
        pytest.param(
            "from torch import cuda\ncuda.empty_cache()\n",
            [(2, 1, "PS002", "torch.cuda.empty_cache")],
            id="from torch import cuda",
        ),
        pytest.param(
            "from torch import cuda as c\nc.set_device(0)\n",
            [(2, 1, "PS003", "torch.cuda.set_device")],
            id="from torch import cuda as c",
        ),
        pytest.param(
            "import torch.cuda as tc\ntc.manual_seed(0)\n",
            [(2, 1, "PS004", "torch.cuda.manual_seed")],
            id="import torch.cuda as tc",
        ),
        pytest.param(
            "import torch.cuda\ntorch.cuda.Stream()\n",
            [(2, 1, "PS001", "torch.cuda.Stream")],
            id="import torch.cuda binds torch",
        ),
        pytest.param(
            "from torch.cuda import Event as E\nE()\nE()\n",
            [(1, 24, "PS001", "torch.cuda.Event")],
            id="from torch.cuda import Event as E (reported at the import)",
        ),
        pytest.param(
            "from torch.cuda import (\n    Event,\n    device_count,\n)\n",
            [(2, 5, "PS001", "torch.cuda.Event"), (3, 5, "PS003", "torch.cuda.device_count")],
            id="parenthesised from-import, one finding per name",
        ),
        pytest.param(
            "import torch\nt = torch\nt.cuda.Event()\n",
            [(3, 1, "PS001", "torch.cuda.Event")],
            id="t = torch",
        ),
        pytest.param(
            "import torch\nc = torch.cuda\nc.current_stream()\n",
            [(3, 1, "PS001", "torch.cuda.current_stream")],
            id="c = torch.cuda",
        ),
        pytest.param(
            "import torch as t\nx = y = t.cuda\nx.device(0)\ny.device(1)\n",
            [(3, 1, "PS003", "torch.cuda.device"), (4, 1, "PS003", "torch.cuda.device")],
            id="chained assignment",
        ),
        pytest.param(
            "import torch\nif (c := torch.cuda):\n    c.synchronize()\n",
            [(3, 5, "PS001", "torch.cuda.synchronize")],
            id="walrus",
        ),
        pytest.param(
            "import torch\nc: object = torch.cuda\nc.synchronize()\n",
            [(3, 1, "PS001", "torch.cuda.synchronize")],
            id="annotated assignment",
        ),
        pytest.param(
            "import torch\nE = torch.cuda.Event\nE()\n",
            [(2, 5, "PS001", "torch.cuda.Event")],
            id="API bound to a name: reported where it is spelled out",
        ),
        pytest.param(
            "from torch.cuda.memory import empty_cache\nimport torch\n"
            "torch.cuda.memory.memory_stats()\ntorch.cuda.streams.Event()\n",
            [
                (1, 31, "PS002", "torch.cuda.empty_cache"),
                (3, 1, "PS002", "torch.cuda.memory_stats"),
                (4, 1, "PS001", "torch.cuda.Event"),
            ],
            id="defining submodules",
        ),
        pytest.param(
            "from torch.cuda import memory\nmemory.max_memory_reserved()\n",
            [(2, 1, "PS002", "torch.cuda.max_memory_reserved")],
            id="from torch.cuda import memory",
        ),
        pytest.param(
            "torch.cuda.Event()\n",
            [(1, 1, "PS001", "torch.cuda.Event")],
            id="unbound global torch is the module",
        ),
        pytest.param(
            "import torch\ntorch.cuda.Event().record(torch.cuda.current_stream())\n",
            [(2, 1, "PS001", "torch.cuda.Event"), (2, 27, "PS001", "torch.cuda.current_stream")],
            id="nested in a call chain",
        ),
        pytest.param(
            "import torch\norig = torch.cuda.Event\ntorch.cuda.Event = torch.xpu.Event\n",
            [(2, 8, "PS001", "torch.cuda.Event"), (3, 1, "PS010", "torch.cuda.Event")],
            id="monkey-patching the attribute",
        ),
    ],
)
def test_alias_forms(source: str, expected: list[tuple[int, int, str, str]]) -> None:
    """Every import and assignment alias of torch / torch.cuda reaches the API."""
    assert findings(source) == expected


ALIAS_FORMS = [
    "import torch as {alias}\n{alias}.cuda.{api}()\n",
    "import torch.cuda as {alias}\n{alias}.{api}()\n",
    "from torch import cuda as {alias}\n{alias}.{api}()\n",
    "import torch\n{alias} = torch.cuda\n{alias}.{api}()\n",
    "import torch\n{alias} = torch\n\ndef f():\n    return {alias}.cuda.{api}\n",
]
DEFAULT_APIS = [api for rule in RULES for api in rule.apis if "*" not in api]
identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)


@given(alias=identifiers, api=st.sampled_from(DEFAULT_APIS), form=st.sampled_from(ALIAS_FORMS))
def test_any_alias_name_reaches_any_api(alias: str, api: str, form: str) -> None:
    """Whatever the alias is called, its use is one finding naming the API."""
    source = form.format(alias=alias, api=api)
    assert [f[3] for f in findings(source)] == [f"torch.cuda.{api}"]


@given(alias=identifiers, api=st.sampled_from(DEFAULT_APIS), form=st.sampled_from(ALIAS_FORMS))
def test_the_same_code_as_text_is_never_reported(alias: str, api: str, form: str) -> None:
    """Code that is only quoted in a string or commented out is not reported."""
    code = form.format(alias=alias, api=api)
    commented = "".join(f"# {line}\n" for line in code.splitlines())
    assert findings(f"s = {code!r}\n") == []
    assert findings(f'"""{code}"""\n') == []
    assert findings(commented) == []


@pytest.mark.parametrize(
    ("code", "api"),
    [(rule.code, api) for rule in RULES for api in rule.apis if "*" not in api]
    + [
        ("PS002", "memory_summary"),
        ("PS002", "memory_snapshot"),
        ("PS002", "max_memory_cached"),
    ],
)
def test_every_rule_api(code: str, api: str) -> None:
    """Each default API is reported under its family's code with its replacement."""
    data = f"import torch\ntorch.cuda.{api}()\n".encode()
    [finding] = check_source(data, "t.py", ALL)
    assert (finding.code, finding.api) == (code, f"torch.cuda.{api}")
    assert finding.message.startswith(f"torch.cuda.{api} is CUDA-only; use ")


@pytest.mark.parametrize(
    "api",
    ["is_available", "memory", "amp", "is_bf16_supported"],
)
def test_unlisted_apis_are_not_reported(api: str) -> None:
    """torch.cuda names outside the rule table are left alone."""
    assert findings(f"import torch\ntorch.cuda.{api}()\n") == []


def test_comments_strings_and_docstrings_are_never_reported() -> None:
    """Text that mentions torch.cuda APIs is not code and is not reported."""
    source = '''
        """Module docstring: torch.cuda.Event() and torch.cuda.synchronize()."""
        import torch
        # torch.cuda.empty_cache()
        s = "torch.cuda.set_device(0)"
        b = b"torch.cuda.manual_seed(1)"
        r = r"torch.cuda.Stream"
        doc = """
        torch.cuda.current_stream()
        """
        f = f"torch.cuda.device_count() is {1 + 1}"
        annotation: Literal["torch.cuda.Event"]

        def g() -> None:
            """torch.cuda.mem_get_info() in a function docstring."""

        class C:
            """torch.cuda.memory_allocated() in a class docstring."""
    '''
    assert findings(source) == []


def test_expressions_inside_fstring_braces_are_code() -> None:
    """The braces of an f-string hold code, so a use there is reported."""
    source = 'import torch\nf"used {torch.cuda.memory_allocated()} bytes"\n'
    assert findings(source) == [(2, 9, "PS002", "torch.cuda.memory_allocated")]


def test_every_use_is_reported_not_only_the_first() -> None:
    """Unlike a first-match regex script, all uses in a file are reported."""
    source = "import torch\n" + "torch.cuda.synchronize()\n" * 5
    assert [line for line, *_ in findings(source)] == [2, 3, 4, 5, 6]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import numpy as torch\ntorch.cuda.Event()\n", id="import shadows"),
        pytest.param("import torch\n\ndef f(torch):\n    torch.cuda.Event()\n", id="parameter"),
        pytest.param(
            "from torch import cuda\n\ndef f():\n    cuda = make()\n    cuda.synchronize()\n",
            id="local assignment",
        ),
        pytest.param(
            "from torch import cuda\n[cuda.synchronize() for cuda in things]\n",
            id="comprehension variable",
        ),
        pytest.param(
            "from torch import cuda\nf = lambda cuda: cuda.synchronize()\n", id="lambda parameter"
        ),
        pytest.param("from .torch import cuda\ncuda.synchronize()\n", id="relative import"),
        pytest.param("import mylib\nmylib.torch.cuda.Event()\n", id="attribute of another module"),
        pytest.param("import torch\nself.torch.cuda.Event()\n", id="attribute of self"),
        pytest.param(
            "import torch\n\nclass A:\n    torch = None\n    torch.cuda.Event()\n",
            id="class attribute",
        ),
    ],
)
def test_shadowed_and_unrelated_names_are_not_reported(source: str) -> None:
    """A name rebound to something else in an inner scope is not torch there."""
    assert findings(source) == []


def test_function_bodies_see_later_module_imports() -> None:
    """A function body runs after the module's imports, wherever they are."""
    source = "def f():\n    return cuda.device_count()\n\nfrom torch import cuda\n"
    assert findings(source) == [(2, 12, "PS003", "torch.cuda.device_count")]


def test_class_names_do_not_leak_into_methods() -> None:
    """A method does not see its class body's names, as in Python."""
    source = """
        from torch import cuda

        class A:
            cuda = None

            def m(self):
                return cuda.stream(None)
    """
    assert findings(source) == [(8, 16, "PS001", "torch.cuda.stream")]


def test_import_guarded_by_try_stays_tracked() -> None:
    """``try: import torch / except ImportError: torch = None`` keeps torch tracked."""
    source = """
        try:
            import torch.cuda as tc
        except ImportError:
            tc = None
        tc.synchronize()
    """
    assert findings(source) == [(6, 1, "PS001", "torch.cuda.synchronize")]


def test_function_local_import() -> None:
    """An import inside a function binds in that function only."""
    source = """
        def f():
            import torch.cuda as tc
            tc.synchronize()

        def g(tc):
            tc.synchronize()
    """
    assert findings(source) == [(4, 5, "PS001", "torch.cuda.synchronize")]


def test_annotations_and_decorators_are_checked() -> None:
    """Annotations, defaults and decorators are code evaluated at definition."""
    source = """
        import torch

        @torch.cuda.device(0)
        def f(e: torch.cuda.Event = torch.cuda.Event()) -> torch.cuda.Stream: ...
    """
    assert [api for *_, api in findings(source)] == [
        "torch.cuda.device",
        "torch.cuda.Event",
        "torch.cuda.Event",
        "torch.cuda.Stream",
    ]


def test_match_statement_and_dict_unpacking() -> None:
    """Class patterns are uses; ``{**d}`` (a None key) does not break the walk."""
    source = """
        import torch
        d = {**{}, "k": torch.cuda.device_count()}
        match d:
            case {"k": torch.cuda.Event() as e, **rest}:
                pass
            case Point(x=0, y=other):
                torch.cuda.synchronize()
    """
    assert [line for line, *_ in findings(source)] == [3, 5, 8]


@pytest.mark.parametrize(
    ("comment", "reported"),
    [
        ("# patchscope: ignore[PS001]", False),
        ("# patchscope: ignore[PS002, PS001]", False),
        ("# patchscope: ignore", False),
        ("#patchscope:ignore[PS001]  timing needs CUDA events", False),
        ("# noqa: E501  # patchscope: ignore[PS001]", False),
        ("# patchscope: ignore[PS002]", True),
        ("# patchscope: ignored", True),
        ("# some other comment", True),
    ],
)
def test_suppression_comment(comment: str, reported: bool) -> None:
    """``# patchscope: ignore[CODE]`` on the reported line silences that code."""
    source = f"import torch\ntorch.cuda.Event()  {comment}\n"
    assert bool(findings(source)) is reported


def test_suppression_applies_per_finding_on_the_line() -> None:
    """A directive naming one code leaves other codes on the same line reported."""
    source = (
        "import torch\ntorch.cuda.Event(); torch.cuda.empty_cache()  # patchscope: ignore[PS001]\n"
    )
    assert findings(source) == [(2, 21, "PS002", "torch.cuda.empty_cache")]


def test_columns_count_characters_not_bytes() -> None:
    """Columns after non-ASCII text are character columns, as editors expect."""
    source = "import torch\nx = 'é€'; torch.cuda.synchronize()\n"
    assert findings(source) == [(2, 11, "PS001", "torch.cuda.synchronize")]


def test_end_position_covers_the_api_only() -> None:
    """The end column stops at the API name, not at the rest of the chain."""
    [finding] = check_source(b"import torch\ntorch.cuda.Event().record()\n", "t.py", ALL)
    assert (finding.line, finding.column, finding.end_line, finding.end_column) == (2, 1, 2, 17)


def test_extend_apis_are_reported_as_ps005() -> None:
    """Names added with extend-apis, globs and dotted ones included, are PS005."""
    rules = RuleSet(CODES, ["is_available", "get_arch_*", "jiterator._create_jit_fn"])
    source = """
        import torch
        torch.cuda.is_available()
        torch.cuda.get_arch_list()
        torch.cuda.jiterator._create_jit_fn("x")
        torch.cuda.jiterator._create_multi_output_jit_fn("x")
    """
    assert findings(source, rules) == [
        (3, 1, "PS005", "torch.cuda.is_available"),
        (4, 1, "PS005", "torch.cuda.get_arch_list"),
        (5, 1, "PS005", "torch.cuda.jiterator._create_jit_fn"),
    ]


def test_unselected_rules_are_not_matched() -> None:
    """A rule set without a code never produces it."""
    source = "import torch\ntorch.cuda.Event()\ntorch.cuda.empty_cache()\n"
    assert findings(source, RuleSet(["PS002"])) == [(3, 1, "PS002", "torch.cuda.empty_cache")]


def test_syntax_error_is_ps000_with_position_and_message() -> None:
    """A file that does not parse yields one PS000 naming the parser's error."""
    [finding] = check_source(b"import torch.cuda\nprint 'hello'\n", "legacy.py", ALL)
    assert (finding.path, finding.line, finding.code, finding.api) == (
        "legacy.py",
        2,
        "PS000",
        None,
    )
    assert finding.message.startswith("syntax error: ")


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"x = 1\x00\n", id="null byte"),
        pytest.param(b"x = '\xff\xfe'\n", id="invalid utf-8"),
        pytest.param(b"# -*- coding: no-such-codec -*-\nx = 1\n", id="unknown encoding"),
    ],
)
def test_undecodable_files_are_ps000(data: bytes) -> None:
    """Bytes Python cannot read as source are a PS000, not a crash."""
    [finding] = check_source(data, "bad.py", ALL)
    assert finding.code == "PS000"


def test_encoding_cookie_is_honoured() -> None:
    """A latin-1 file is decoded by its cookie; columns count its characters."""
    source = "# -*- coding: latin-1 -*-\nimport torch\nx = 'é'; torch.cuda.synchronize()\n"
    [finding] = check_source(source.encode("latin-1"), "t.py", ALL)
    assert (finding.line, finding.column) == (3, 10)


def test_deeply_nested_code_does_not_exhaust_the_stack() -> None:
    """The walk is iterative, so operator chains deeper than the recursion limit work."""
    source = "import torch\nx = " + " + ".join(["1"] * 2500) + " + torch.cuda.device_count()\n"
    assert [code for _, _, code, _ in findings(source)] == ["PS003"]


def test_unreadable_file_is_ps000() -> None:
    """A path that cannot be opened is reported, not raised."""
    [finding] = check_file("/nonexistent/dir/x.py", ALL)
    assert finding.code == "PS000"
    assert finding.message.startswith("cannot read: ")


def test_findings_sort_by_path_then_position() -> None:
    """Findings order as editors list them: path, line, column."""
    a = Finding("a.py", 2, 1, "PS001", "m", 2, 2)
    b = Finding("a.py", 10, 1, "PS001", "m", 10, 2)
    c = Finding("b.py", 1, 1, "PS001", "m", 1, 2)
    assert sorted([c, b, a]) == [a, b, c]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            'import torch\ndef f(s: Optional["torch.cuda.Stream"]): ...\n',
            [(2, 20, "torch.cuda.Stream")],
            id="inside Optional[...]",
        ),
        pytest.param(
            "import torch\nx: 'torch.cuda.Event'\n",
            [(2, 5, "torch.cuda.Event")],
            id="whole annotation",
        ),
        pytest.param(
            'import torch.cuda as tc\ndef f() -> "tc.Stream | None": ...\n',
            [(2, 13, "torch.cuda.Stream")],
            id="return, through an alias",
        ),
        pytest.param(
            "import torch\nx: \"Optional['torch.cuda.Event']\"\n",
            [(2, 15, "torch.cuda.Event")],
            id="quoted twice",
        ),
        pytest.param(
            'import torch\nx: "torch.cuda.\\x45vent"\n',
            [(2, 4, "torch.cuda.Event")],
            id="escapes: at the string",
        ),
    ],
)
def test_quoted_annotations_are_checked(
    source: str, expected: list[tuple[int, int, str | None]]
) -> None:
    """A string annotation is parsed and reported like the unquoted form."""
    assert [(line, col, api) for line, col, _, api in findings(source)] == expected


@pytest.mark.parametrize(
    "source",
    [
        'import torch\nx: Literal["torch.cuda.Event"]\n',
        'import torch\nx: Annotated[int, "torch.cuda.Event"]\n',
        'import torch\nx: "not an expression, torch.cuda.Event("\n',
        'import torch\ndef f(x="torch.cuda.Event"): ...\n',
    ],
)
def test_strings_that_are_not_types_are_not_parsed(source: str) -> None:
    """Literal values, Annotated metadata, prose and defaults stay text."""
    assert findings(source) == []


@pytest.mark.parametrize(
    ("api", "code"),
    [
        ("set_stream", "PS001"),
        ("default_stream", "PS001"),
        ("get_device_capability", "PS003"),
        ("get_device_properties", "PS003"),
        ("get_device_name", "PS003"),
        ("reset_accumulated_memory_stats", "PS002"),
        ("CUDAGraph", "PS006"),
        ("graph", "PS006"),
        ("make_graphed_callables", "PS006"),
    ],
)
def test_apis_torch_accelerator_replaces_are_reported(api: str, code: str) -> None:
    """The defaults cover streams, devices, memory and graphs with a torch.accelerator hint."""
    [finding] = check_source(f"import torch\ntorch.cuda.{api}()\n".encode(), "t.py", ALL)
    assert finding.code == code
    assert "torch.accelerator." in finding.message


def test_allow_apis_are_never_reported() -> None:
    """allow-apis names (and globs) are skipped, through any spelling of the API."""
    rules = RuleSet(CODES, allow_apis=["Event", "Stream"])
    source = """
        import torch
        from torch.cuda.streams import Event
        torch.cuda.Event()
        torch.cuda.Stream()
        torch.cuda.synchronize()
    """
    assert findings(source, rules) == [(6, 1, "PS001", "torch.cuda.synchronize")]


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        pytest.param(b"x = 1  # caf\xe9\n", "cannot decode line 1 as utf-8", id="latin-1 comment"),
        pytest.param(b"x = 1\n\nx = 2\x00\n", "null bytes (line 3)", id="null byte, no cuda"),
        pytest.param(b"# coding: latin-1\nx = '\xe9'  # cuda\n", None, id="declared latin-1"),
    ],
)
def test_undecodable_bytes_are_ps000_in_any_file(data: bytes, fragment: str | None) -> None:
    """Bytes CPython refuses are PS000 even where the prefilter skips parsing."""
    found = check_source(data, "t.py", ALL)
    if fragment is None:
        assert found == []
    else:
        [finding] = found
        assert finding.code == "PS000"
        assert fragment in finding.message


def test_skip_annotations_leaves_annotations_unchecked() -> None:
    """skip_annotations drops annotation-only uses and keeps uses in code."""
    source = """
        import torch
        def f(s: torch.cuda.Stream, e: "torch.cuda.Event") -> torch.cuda.Stream:
            x: torch.cuda.Event = torch.cuda.Event()
            return s
    """
    skipping = RuleSet(CODES, skip_annotations=True)
    assert findings(source, skipping) == [(4, 27, "PS001", "torch.cuda.Event")]
    assert len(findings(source)) == 5


@pytest.mark.parametrize(
    ("api", "code"),
    [
        ("ExternalStream", "PS001"),
        ("get_rng_state", "PS004"),
        ("set_rng_state", "PS004"),
        ("is_current_stream_capturing", "PS006"),
        ("MemPool", "PS002"),
        ("use_mem_pool", "PS002"),
        ("nvtx.range_push", "PS009"),
    ],
)
def test_added_default_apis(api: str, code: str) -> None:
    """The APIs real projects hard-code beyond the first table are reported."""
    [(_, _, got, _)] = findings(f"import torch\ntorch.cuda.{api}()\n")
    assert got == code
