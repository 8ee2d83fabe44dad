"""The pull-request comment: the verdict first, changes localised and worst first, under GitHub's limit, and
whatever the service holds shown as inert text."""

import enum
import html
import random
import re
import unicodedata
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt
from pydantic import BaseModel

from app.analysis.verdicts import Change, Rule
from app.ci.comment import LIMIT, MARKER, Context, escape, render
from app.ci.gate import FailOn, failures
from app.enums import AlarmKind, Verdict
from app.schemas.compare import Apart, CaptureAlarm, CellChange, CellSide, Comparison, FieldDifference, Interval, SpeedCall

CONTEXT = Context(head_commit="abc1234def", base_commit="def4567abc", server="http://bench.local:8000/")
BACKENDS, MODES = ("FLASH_ATTN", "FLASHINFER"), ("PIECEWISE", "FULL", "FULL_DECODE_ONLY")


def _side(build: str, *, ran: bool = True, kind: str | None = None, title: str | None = None, modes=("FULL",)) -> CellSide:
    return CellSide(
        sweep_ids=[1], build=build, ran=3 if ran else 0, died=0 if ran else 3, repeats=3 if ran else 0,
        tokens_per_s=Interval(value=1000.0, low=950.0, high=1050.0) if ran else None,
        acceptance=Interval(value=0.6, low=0.59, high=0.61) if ran else None, resolved_graph_modes=list(modes) if ran else [],
        downgraded=False, draft_eager=False, crash_kinds={kind: 3} if kind else {}, crash_signature="sig-1" if kind else None,
        crash_title=title, vllm_versions=["0.32.0"], gpu_names=["NVIDIA H200"],
    )


def _cell(backend: str, mode: str, verdict: Verdict = Verdict.UNCHANGED, *, speed: tuple = (1.0, 0.97, 1.03),
          moved: tuple | None = None, label: str = "dflash k=3", head: CellSide | None = None,
          base: CellSide | None = None) -> CellChange:
    slower = speed[0] < 0.95 and verdict is Verdict.WORSE
    faster = speed[0] > 1.05 and verdict is Verdict.BETTER
    return CellChange(
        verdict=verdict, gpu_kind="H200", method=label.split()[0], label=label, backend=backend, graph_mode=mode,
        speed_ratio=Interval(value=speed[0], low=speed[1], high=speed[2]),
        acceptance_difference=Interval(value=moved[0], low=moved[1], high=moved[2]) if moved else Interval(value=0, low=-0.01, high=0.01),
        tokens_per_s_change=Change.WORSE if slower else Change.BETTER if faster else Change.UNCHANGED,
        acceptance_change=Change.WORSE if moved and moved[0] < 0 else Change.UNCHANGED,
        reasons=["tokens/s moved"] if slower or faster else [], base=base or _side("main"), head=head or _side("pr-12"),
    )


def _comparison(changes: list[CellChange], alarms: list[CaptureAlarm] = ()) -> Comparison:  # type: ignore[assignment]
    counts: dict = {}
    for c in changes:
        counts[c.verdict] = counts.get(c.verdict, 0) + 1
    return Comparison(base_sweep=3, head_sweep=4, base_build="main", head_build="pr-12", counts=counts,
                      changes=changes, alarms=list(alarms), base_only=0, head_only=0)


def _plane(**moved: CellChange) -> list[CellChange]:
    """The six cells of BACKENDS x MODES, unchanged but those given (keyed BACKEND_MODE)."""
    return [moved.get(f"{b}_{m}", _cell(b, m)) for b in BACKENDS for m in MODES]


def test_a_change_confined_to_one_cell_is_said_so_with_its_ratio() -> None:
    slow = _cell("FLASHINFER", "FULL_DECODE_ONLY", Verdict.WORSE, speed=(0.71, 0.66, 0.76))
    body = render(_comparison(_plane(FLASHINFER_FULL_DECODE_ONLY=slow)), CONTEXT)
    assert body.splitlines()[0] == ("**draftbench: 1 regression** (head abc1234 vs base def4567, H200, "
                                    "vLLM build pr-12 (0.32.0) vs main)")
    assert "- slower only on FLASHINFER with FULL_DECODE_ONLY (dflash k=3, H200): 0.71x [0.66, 0.76]" in body


def test_a_change_confined_to_a_backend_or_a_graph_mode_is_said_that_way() -> None:
    on_flashinfer = {f"FLASHINFER_{m}": _cell("FLASHINFER", m, Verdict.WORSE, speed=(s, s - 0.05, s + 0.05))
                     for m, s in zip(MODES, (0.8, 0.7, 0.62), strict=True)}
    assert "- slower only on FLASHINFER (dflash k=3, H200): 0.62x to 0.80x" in render(_comparison(_plane(**on_flashinfer)), CONTEXT)
    with_full = {f"{b}_FULL": _cell(b, "FULL", Verdict.WORSE, moved=(-0.09, -0.094, -0.086)) for b in BACKENDS}
    said = render(_comparison(_plane(**with_full)), CONTEXT)
    assert "- accepting less only with FULL (dflash k=3, H200): -9.0 points to -9.0 points" in said
    everywhere = {f"{b}_{m}": _cell(b, m, Verdict.WORSE, speed=(0.5, 0.45, 0.55)) for b in BACKENDS for m in MODES}
    assert "- slower everywhere (6 cells) (dflash k=3, H200): 0.50x to 0.50x" in render(_comparison(_plane(**everywhere)), CONTEXT)


def test_regressions_come_worst_first_then_crashes_fixes_fallbacks_alarms_and_gains() -> None:
    cells = [
        _cell("FLASH_ATTN", "FULL", Verdict.WORSE, moved=(-0.05, -0.06, -0.04)),
        _cell("FLASHINFER", "FULL", Verdict.WORSE, speed=(0.5, 0.45, 0.55), label="ngram k=3"),
        _cell("FLASHINFER", "PIECEWISE", Verdict.NEWLY_CRASHING,
              head=_side("pr-12", ran=False, kind="cuda_illegal_memory_access", title="illegal memory access in FlashInfer decode")),
        _cell("FLASH_ATTN", "PIECEWISE", Verdict.FIXED, base=_side("main", ran=False, kind="out_of_memory")),
        _cell("FLASH_ATTN", "FULL_DECODE_ONLY", Verdict.NOW_DOWNGRADED, head=_side("pr-12", modes=("PIECEWISE",)),
              base=_side("main", modes=("FULL_DECODE_ONLY",))),
        _cell("FLASHINFER", "FULL_DECODE_ONLY", Verdict.BETTER, speed=(1.3, 1.2, 1.4)),
    ]
    alarm = CaptureAlarm(kind=AlarmKind.ACCEPTANCE, backend="FLASHINFER", graph_mode="FULL", label="dflash k=3",
                         difference=Interval(value=-0.09, low=-0.094, high=-0.086), sentence="FLASHINFER FULL: acceptance -9.0 points")
    body = render(_comparison(cells, [alarm]), CONTEXT)
    assert body.splitlines()[0].startswith("**draftbench: 2 regressions, 1 new crash, 1 cell now downgraded, "
                                           "1 graph-capture alarm, 1 fixed crash, 1 improvement**")
    order = ["#### Regressions", "- slower on FLASHINFER with FULL (ngram k=3, H200): 0.50x [0.45, 0.55]",
             "- accepting less only on FLASH_ATTN with FULL (dflash k=3, H200): -5.0 points [-6.0, -4.0]",
             "#### New crashes", "- cuda_illegal_memory_access: illegal memory access in FlashInfer decode "
             "([crash group](http://bench.local:8000/crashes/sig-1)), in 1 cell: FLASHINFER PIECEWISE (dflash k=3, H200)",
             "#### Fixed crashes", "- FLASH_ATTN PIECEWISE (dflash k=3, H200): runs again; the base died with out_of_memory",
             "#### Now running something else",
             "- FLASH_ATTN FULL_DECODE_ONLY (dflash k=3, H200): ran PIECEWISE (the base ran FULL_DECODE_ONLY)",
             "#### Graph-capture alarms (head)", "#### Improvements", "- faster only on FLASHINFER with FULL_DECODE_ONLY",
             "<details><summary>All 6 compared cells</summary>", "[The whole comparison](http://bench.local:8000/compare?base=3&head=4)"]
    places = [body.index(text) for text in order]
    assert places == sorted(places)
    assert body.rstrip().endswith(MARKER)


def test_nothing_moved_says_no_regression() -> None:
    body = render(_comparison(_plane()), CONTEXT)
    assert body.startswith("**draftbench: no regression** (head abc1234")
    assert "####" not in body


def test_sweeps_that_share_no_cell_say_which_fields_differ() -> None:
    apart = Apart(sentence="Every base cell differs from every head cell in workload.max_tokens: 128 vs 256.",
                  fields=[FieldDifference(field="workload.max_tokens", base=["128"], head=["256"], every_cell=True)])
    body = render(_comparison([]).model_copy(update={"apart": apart}), CONTEXT)
    assert body.startswith("**draftbench: no common cell to compare** (")
    assert "The sweeps share no cell. Every base cell differs from every head cell in workload.max_tokens: 128 vs 256." in body


def test_cells_too_noisy_to_call_are_counted_not_called() -> None:
    noisy = _cell("FLASHINFER", "FULL", Verdict.UNDECIDED, speed=(0.8, 0.5, 1.3))
    body = render(_comparison(_plane(FLASHINFER_FULL=noisy)), CONTEXT)
    assert body.startswith("**draftbench: no regression, 1 cell too noisy to call** (")
    assert ("1 cell moved by more than 5% with too few engine starts to call (7 repeats a side, or 5 builds of "
            "history): see the table.") in body and "#### Regressions" not in body


def _called(cell: CellChange, change: Change, ratio: tuple, detectable: float | None, rule: Rule = Rule.NOISE_MODEL) -> CellChange:
    call = SpeedCall(change=change, rule=rule, ratio=ratio[0], low=ratio[1], high=ratio[2], confidence=0.95,
                     detectable=detectable, base_starts=3, head_starts=3, pairs=0, sentence="said")
    return cell.model_copy(update={"tokens_per_s_call": call, "tokens_per_s_change": change})


def test_a_call_by_the_noise_model_says_what_it_could_detect() -> None:
    slow = _called(_cell("FLASHINFER", "FULL", Verdict.WORSE, speed=(0.41, 0.36, 0.47)), Change.WORSE, (0.41, 0.36, 0.47), 0.08)
    quiet = _called(_cell("FLASH_ATTN", "FULL", speed=(0.97, 0.91, 1.03)), Change.UNCHANGED, (0.97, 0.91, 1.03), 0.08)
    body = render(_comparison(_plane(FLASHINFER_FULL=slow, FLASH_ATTN_FULL=quiet)), CONTEXT)
    assert "- slower only on FLASHINFER with FULL (dflash k=3, H200): 0.41x [0.36, 0.47]" in body
    assert "| worse | H200 | dflash k=3 | FLASHINFER | FULL | 1000 | 1000 | 0.41x [0.36, 0.47] | 8.0 % (3 and 3 starts) |" in body
    assert "| unchanged | H200 | dflash k=3 | FLASH_ATTN | FULL | 1000 | 1000 | 0.97x [0.91, 1.03] | 8.0 % (3 and 3 starts) |" in body
    assert "No noise model" not in body


def test_cells_undecided_under_the_model_say_how_much_their_starts_could_find() -> None:
    noisy = [_called(_cell(b, "FULL", Verdict.UNDECIDED, speed=(0.85, 0.6, 1.2)), Change.UNDECIDED, (0.85, 0.6, 1.2), d)
             for b, d in zip(BACKENDS, (0.21, 0.33), strict=True)]
    body = render(_comparison(_plane(FLASH_ATTN_FULL=noisy[0], FLASHINFER_FULL=noisy[1])), CONTEXT)
    # 3 starts a side finding 21 % and 33 %; the 15 % seen needs ceil(3 (ln 1.21 / ln 1.15)^2) = 6 and
    # ceil(3 (ln 1.33 / ln 1.15)^2) = 13 (app.ci.looks.pairs_needed).
    assert ("2 cells moved by more than 5% but inside the noise of their starts (these starts could detect 21 % to 33 %): "
            "about 6 to 13 starts a side would find a change the size of the one seen; see the table.") in body


def test_a_fallback_called_slower_is_named_slower_with_its_interval_and_fails_the_regression_check() -> None:
    # The H200's eager DFlash draft (2026-12-03): FLASH_ATTN made to run the draft eagerly, 3 pairs of starts.
    said = "tokens/s 0.76x [0.64, 0.90] (3 pairs of starts, 95 %): could detect 25 % or more; slower"
    eager = _called(_cell("FLASH_ATTN", "FULL", Verdict.NOW_EAGER_DRAFT, speed=(0.76, 0.64, 0.90)), Change.WORSE,
                    (0.76, 0.64, 0.90), 0.25, Rule.PAIRED)
    eager = eager.model_copy(update={"tokens_per_s_call": eager.tokens_per_s_call.model_copy(update={"sentence": said})})
    comparison = _comparison(_plane(FLASH_ATTN_FULL=eager))
    body = render(comparison, CONTEXT)
    assert body.startswith("**draftbench: 1 cell now with an eager draft (1 slower)** (")
    assert ("- FLASH_ATTN FULL (dflash k=3, H200): the draft now runs eager (graphed in the base), and it is **slower**: "
            "tokens/s 0.76x \\[0.64, 0.90\\] (3 pairs of starts, 95 %): could detect 25 % or more; slower") in body
    assert failures(comparison, FailOn.REGRESSION) == ["1 now running something else, and slower"]
    quiet = _called(eager, Change.UNCHANGED, (0.98, 0.9, 1.07), 0.25, Rule.PAIRED)
    assert failures(_comparison(_plane(FLASH_ATTN_FULL=quiet)), FailOn.REGRESSION) == []
    assert "slower" not in render(_comparison(_plane(FLASH_ATTN_FULL=quiet)), CONTEXT).split("<details>")[0]


def test_a_side_with_nothing_finished_says_so_not_died() -> None:
    queued = _side("pr-12", ran=False).model_copy(update={"died": 0})
    body = render(_comparison(_plane(FLASH_ATTN_FULL=_cell("FLASH_ATTN", "FULL", Verdict.PENDING, head=queued))), CONTEXT)
    assert body.startswith("**draftbench: no regression, 1 cell not finished** (")
    assert "| pending | H200 | dflash k=3 | FLASH_ATTN | FULL | 1000 | not finished |" in body


def test_cells_without_a_noise_model_say_so() -> None:
    bare = _called(_cell("FLASHINFER", "FULL"), Change.UNCHANGED, (1.0, 0.97, 1.03), None, Rule.NO_MODEL)
    body = render(_comparison(_plane(FLASHINFER_FULL=bare)), CONTEXT)
    assert ("No noise model for the tokens/s of 1 cell (H200): judged without one (a call needs 7 engine starts a side, "
            "5 builds of history or a ratio beyond 0.31x to 3.26x), and what they could have found is not known.") in body
    assert "| unchanged | H200 | dflash k=3 | FLASHINFER | FULL | 1000 | 1000 | 1.00x [0.97, 1.03] | no model (3 and 3 starts) |" in body


def test_the_collapsed_table_is_cut_first_to_fit_githubs_limit() -> None:
    many = [_cell(BACKENDS[i % 2], MODES[i % 3], label=f"ngram k={i}") for i in range(3000)]
    many[0] = _cell("FLASHINFER", "FULL", Verdict.WORSE, speed=(0.7, 0.65, 0.75), label="ngram k=0")
    body = render(_comparison(many), CONTEXT)
    assert len(body) <= LIMIT
    assert "- slower on FLASHINFER with FULL (ngram k=0, H200): 0.70x [0.65, 0.75]" in body
    assert "of 3000 cells shown, to fit GitHub's 65,536-character limit" in body and body.rstrip().endswith(MARKER)


def test_a_huge_visible_part_is_cut_at_a_line_and_says_so() -> None:
    crashed = [_cell("FLASHINFER", "FULL", Verdict.NEWLY_CRASHING, label=f"ngram k={i}",
                     head=_side("pr-12", ran=False, kind="exception", title="x" * 100)) for i in range(1000)]
    for i, cell in enumerate(crashed):  # a thousand different crash groups
        cell.head.crash_signature = f"sig-{i}"
    body = render(_comparison(crashed), CONTEXT, limit=20_000)
    assert len(body) <= 20_000 and "Cut to fit GitHub's 65,536-character limit" in body and body.rstrip().endswith(MARKER)


# CommonMark with GitHub's tables and strikethrough; what GitHub adds after it (mentions, references, bare
# URLs) is looked for in the text it shows.
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
ZWJ = "\u200d"
LIVE_TEXT = re.compile(r"@[\w.-]|#\w|(?i:gh-\d)|://|(?i:www\.)")
# What a worker or the database may hand the comment: every trick of Markdown and of GitHub's rendering.
HOSTILE = [
    "0.32.0 [link](http://x) @here",
    "![img](http://x/a.png) [![nested](http://x/b.png)](http://y)",
    "[ref][1] [1]: http://evil.example [^1] [x]: <http://evil.example> 'title'",
    "<a href='http://x'>click</a> <img src=x onerror=alert(1)> <script>alert(1)</script>",
    "<!-- draftbench -->", "<!--", "-->", "</details><details open><summary>pwned</summary>", "<br/>x<hr>",
    "@octocat @org/team cc:@here @-x email bob@evil.example mailto:bob@evil.example",
    "fixes #123, octo/vllm#5, GH-7, gh-8 and #",
    "a | b || c |", "\\| escaped pipe \\\\| double \\", "trailing backslash \\",
    "`code` ``x`` ```fence", "```\nblock\n```", "~~~\nblock\n~~~",
    "line one\nline two\r\nthree\rfour\u2028five\u2029six\x85seven\x0bvt\x0cff",
    "**bold** __bold__ *em* _em_ ~~strike~~ ~one~ ***both***",
    "&lt;script&gt; &#64;here &#x40;here &amp; &copy; &",
    "http://evil.example https://evil.example/x?y=1 www.evil.example HTTPS://EVIL.EXAMPLE WWW.EVIL.EXAMPLE ftp://x",
    "# heading", "###### h6", "- item", "+ item", "* item", "1. item", "1) item", "> quote", "---", "***", "___",
    "    indented code", "\tindented", "- [ ] task", "- [x] done",
    "$x^2$ and $$\\sum$$ $`code`$",
    "\x00nul \x1b[31mred\x1b[0m \x07bell \x7fdel \x9bcsi",
    "\u202eevil\u202c \u2066isolate\u2069 zero\u200bwidth @\u200bhere #\u200b12 \ufeffbom",
    ":+1: <kbd>x</kbd> <sub>y</sub> <ins>z</ins>", "", " ", "__init__ FULL_DECODE_ONLY _lead trail_ a_b_",
    "=== setext", "a\n===", "a\n---", "[link](javascript:alert(1))", "<http://autolink.example>", "x" * 300,
]


def _shown(value: str) -> str:
    """What GitHub must show for ``value``: control characters as spaces, invisible format characters dropped,
    whitespace runs as one space."""
    kept = "".join(" " if unicodedata.category(c) == "Cc" else "" if unicodedata.category(c) == "Cf" else c for c in value)
    return " ".join(kept.split())


def _assert_inert(value: str) -> None:
    out = escape(value)
    inline = MD.renderInline(out)
    assert "<" not in inline, (value, out, inline)  # no tag of any kind: a shown "<" is &lt;
    shown = html.unescape(inline)
    assert shown.replace(ZWJ, "") == _shown(value), (value, out)
    assert not LIVE_TEXT.search(shown), (value, out)
    assert not re.search(r"(?<!\\)\$", out), (value, out)  # every $ escaped: no math
    cell = MD.render(f"| h | after |\n|---|---|\n| {out} | after |\n")
    [shown_in_cell] = re.findall(r"<td>(.*?)</td>\n<td>after</td>", cell, re.S)
    assert html.unescape(shown_in_cell).replace(ZWJ, "") == _shown(value), (value, out, cell)
    item = MD.render(f"- {out}\n")
    assert re.fullmatch(r"<ul>\n<li>[^<]*</li>\n</ul>\n", item), (value, out, item)  # no block opened inside


@pytest.mark.parametrize("value", HOSTILE)
def test_reported_text_shows_as_text_and_renders_nothing(value: str) -> None:
    _assert_inert(value)


def test_reported_text_of_any_mix_of_markdown_syntax_renders_nothing() -> None:
    pieces = [*"\\`*_~[]()!<>&#@|$:/.-+=^{}\"' \n\t\r", "http://", "www.", "GH-", "#1", "@a", "<!--", "-->",
              "](", "&#64;", "&amp;", "1. ", "- ", "\u200b", "\u202e", "\x00", "é_é", "a_b", "a", "1", " "]
    rng = random.Random(20261201)
    for _ in range(3000):
        _assert_inert("".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))))


def _hostile(model: BaseModel, value: str) -> BaseModel:
    """``model`` with every text it holds (strings, lists of them, mapping keys), at any depth, set to ``value``."""
    update: dict = {}
    for name in type(model).model_fields:
        held = getattr(model, name)
        if isinstance(held, enum.Enum):
            continue
        if isinstance(held, str):
            update[name] = value
        elif isinstance(held, BaseModel):
            update[name] = _hostile(held, value)
        elif isinstance(held, list) and held and isinstance(held[0], BaseModel):
            update[name] = [_hostile(h, value) for h in held]
        elif isinstance(held, list) and held and isinstance(held[0], str):
            update[name] = [value]
        elif isinstance(held, dict) and held and all(isinstance(k, str) and not isinstance(k, enum.Enum) for k in held):
            update[name] = {value: list(held.values())[-1]}  # one hostile key
    return model.model_copy(update=update)


def _every_section() -> Comparison:
    """A comparison with a cell of every verdict and an alarm: every part of the comment is written."""
    cells = [
        _cell("FLASHINFER", "FULL", Verdict.WORSE, speed=(0.5, 0.45, 0.55)),
        _cell("FLASH_ATTN", "FULL", Verdict.WORSE, moved=(-0.05, -0.06, -0.04)),
        _cell("FLASHINFER", "PIECEWISE", Verdict.NEWLY_CRASHING, head=_side("pr-12", ran=False, kind="exception", title="t")),
        _cell("FLASH_ATTN", "PIECEWISE", Verdict.FIXED, base=_side("main", ran=False, kind="out_of_memory", title="t")),
        _cell("FLASH_ATTN", "FULL_DECODE_ONLY", Verdict.NOW_DOWNGRADED, head=_side("pr-12", modes=("PIECEWISE",))),
        _cell("FLASHINFER", "FULL_DECODE_ONLY", Verdict.NOW_EAGER_DRAFT),
        _cell("FLASHINFER", "NONE", Verdict.BETTER, speed=(1.3, 1.2, 1.4)),
        _cell("FLASH_ATTN", "NONE", Verdict.UNDECIDED, speed=(0.8, 0.5, 1.3)),
    ]
    for cell in cells:
        cell.reasons = ["why"]
    alarm = CaptureAlarm(kind=AlarmKind.ACCEPTANCE, backend="FLASHINFER", graph_mode="FULL", label="dflash k=3",
                         difference=Interval(value=-0.09, low=-0.094, high=-0.086), sentence="an alarm")
    return _comparison(cells, [alarm])


SECTIONS = ["Regressions", "New crashes", "Fixed crashes", "Now running something else", "Graph-capture alarms (head)",
            "Improvements"]


@pytest.mark.parametrize("value", HOSTILE)
def test_every_text_the_service_holds_is_inert_wherever_the_comment_writes_it(value: str) -> None:
    comparison = _hostile(_every_section(), value)
    context = Context(head_commit=value, base_commit=value, server=CONTEXT.server)
    body = render(comparison, context)
    assert body.count(MARKER) == 1 and body.endswith(f"\n{MARKER}\n")
    tokens = MD.parse(body)
    inline = [child for t in tokens for child in (t.children or [])]
    assert [t.content for t in tokens + inline if t.type.startswith("html")] == [
        "<details><summary>All 8 compared cells</summary>\n", "</details>\n", f"{MARKER}\n"]
    links = [t.attrs["href"] for t in inline if t.type == "link_open"]
    assert links[-1] == "http://bench.local:8000/compare?base=3&head=4"
    assert [unquote(href.removeprefix("http://bench.local:8000/crashes/")) for href in links[:-1]] == ([value] if value else [])
    assert not [t for t in tokens + inline if t.type in ("image", "code_inline", "code_block", "fence", "em_open", "s_open",
                                                           "ordered_list_open", "blockquote_open", "hr")]
    assert [t.type for t in inline if t.type == "strong_open"] == ["strong_open"]  # the headline alone
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == SECTIONS and all(t.tag == "h4" for t in tokens if t.type == "heading_open")
    assert sum(t.type == "bullet_list_open" for t in tokens) == len(SECTIONS)  # one list a section, none nested
    widths: list[int] = []  # cells of each table row
    for t in tokens:
        if t.type == "tr_open":
            widths.append(0)
        elif t.type in ("td_open", "th_open"):
            widths[-1] += 1
    assert widths == [12] * (1 + 8)  # the header and a row a cell
    text = "".join(t.content for t in inline if t.type == "text")
    assert not LIVE_TEXT.search(text) and not re.search(r"(?<!\\)\$", body)
    if _shown(value):
        assert _shown(value) in text.replace(ZWJ, "")


def test_free_text_cannot_break_the_table() -> None:
    cell = _cell("FLASHINFER", "FULL", Verdict.NEWLY_CRASHING, head=_side("pr-12", ran=False, kind="exception", title="a | b <details>"))
    body = render(_comparison([cell]), CONTEXT)
    assert "a \\| b &lt;details&gt;" in body and "<details>" not in body.replace("<details><summary>", "")


def test_the_table_gives_tokens_per_joule_head_over_base_where_both_reported_energy_and_says_not_reported_else() -> None:
    measured = _cell("FLASH_ATTN", "FULL").model_copy(update={"tokens_per_joule_ratio": Interval(value=1.04, low=0.98, high=1.1)})
    unmeasured = _cell("FLASHINFER", "FULL")
    body = render(_comparison([measured, unmeasured]), CONTEXT)
    rows = {line.split(" | ")[3]: line.split(" | ") for line in body.splitlines() if line.startswith("| unchanged")}
    [header] = [line for line in body.splitlines() if line.startswith("| verdict")]
    column = header.split(" | ").index("tok/J head / base [95 %]")
    assert rows["FLASH_ATTN"][column] == "1.04x [0.98, 1.10]"
    assert rows["FLASHINFER"][column] == "not reported"



def test_a_later_looks_level_is_never_shown_as_100_percent() -> None:
    # The H100's 5 ms spin (2026-12-05): called at the third look, alpha 0.00292, 6 pairs; it read "100 %".
    slow = _called(_cell("FLASH_ATTN", "FULL", Verdict.WORSE, speed=(0.89, 0.81, 0.98)), Change.WORSE,
                   (0.89, 0.81, 0.98), 0.12, Rule.PAIRED)
    slow = slow.model_copy(update={"tokens_per_s_call": slow.tokens_per_s_call.model_copy(
        update={"confidence": 1 - 0.00292, "pairs": 6})})
    body = render(_comparison(_plane(FLASH_ATTN_FULL=slow)), CONTEXT)
    assert "0.89x [0.81, 0.98] (6 pairs of starts, 99.7 %; could detect 12 % or more)" in body
    assert "100 %" not in body
