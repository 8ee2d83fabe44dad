"""The pull-request comment: the verdict first, changes localised and worst first, under GitHub's limit."""

from app.analysis.verdicts import Change
from app.ci.comment import LIMIT, MARKER, Context, render
from app.enums import AlarmKind, Verdict
from app.schemas.compare import CaptureAlarm, CellChange, CellSide, Comparison, Interval

CONTEXT = Context(head_commit="abc1234def", base_commit="def4567abc", server="http://bench.local:8000/")
BACKENDS, MODES = ("FLASH_ATTN", "FLASHINFER"), ("PIECEWISE", "FULL", "FULL_DECODE_ONLY")


def _side(build: str, *, ran: bool = True, kind: str | None = None, title: str | None = None, modes=("FULL",)) -> CellSide:  # noqa: ANN001
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
    assert "- accepting less only with FULL (dflash k=3, H200): -9.0 points to -9.0 points" in render(_comparison(_plane(**with_full)), CONTEXT)
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
             "#### New crashes", "- `cuda_illegal_memory_access` illegal memory access in FlashInfer decode "
             "([crash group](http://bench.local:8000/crashes/sig-1)), in 1 cell: FLASHINFER PIECEWISE (dflash k=3, H200)",
             "#### Fixed crashes", "- FLASH_ATTN PIECEWISE (dflash k=3, H200): runs again; the base died with `out_of_memory`",
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


def test_cells_too_noisy_to_call_are_counted_not_called() -> None:
    noisy = _cell("FLASHINFER", "FULL", Verdict.UNDECIDED, speed=(0.8, 0.5, 1.3))
    body = render(_comparison(_plane(FLASHINFER_FULL=noisy)), CONTEXT)
    assert body.startswith("**draftbench: no regression, 1 cell too noisy to call** (")
    assert ("1 cell moved by more than 5% with too few engine starts to call (7 repeats a side, or 5 builds of "
            "history): see the table.") in body and "#### Regressions" not in body


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


def test_free_text_cannot_break_the_table() -> None:
    cell = _cell("FLASHINFER", "FULL", Verdict.NEWLY_CRASHING, head=_side("pr-12", ran=False, kind="exception", title="a | b <details>"))
    body = render(_comparison([cell]), CONTEXT)
    assert "a \\| b &lt;details>" in body and "<details>" not in body.replace("<details><summary>", "")
