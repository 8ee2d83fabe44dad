"""Speedup against load at the API's edge (``/api/v1/speedups``): one method's line across k and load, with the best
k at each load, where each k stops paying and the speedup its counters predict (``app.cells.best_k``)."""

from pydantic import BaseModel, Field

from app.analysis.speedup import Pays


class SpeedupCellOut(BaseModel):
    k: int
    load: int = Field(description="Clients at once (serve), or the batch size: min(num_prompts, max_num_seqs) (offline)")
    label: str
    speedup: float | None = Field(description="tokens/s over the baseline's at the same load; null without a baseline")
    speedup_low: float | None = Field(description="95 % interval of the ratio of the two pooled cells")
    speedup_high: float | None
    acceptance_length: float | None = Field(description="tau = 1 + sum of the per-position acceptance rates")
    predicted_speedup: float | None = Field(description="tau x T0 / T_fit(k); null with one k at this load")
    off_prediction: bool = Field(description="The measured speedup's interval excludes the prediction")
    scheduler_differs: bool = Field(description="vLLM's log says it turned asynchronous scheduling off for this cell's starts "
                                    "and not for its baseline's: the speedup holds the scheduler's cost as well as the drafting's")
    starts: int
    baseline_starts: int
    jobs: list[int]
    baseline_jobs: list[int]


class BestKOut(BaseModel):
    load: int
    k: int
    speedup: float
    speedup_low: float | None
    speedup_high: float | None
    within_noise: list[int] = Field(description="Other k whose interval overlaps the best's")
    measured: int = Field(description="How many k were measured at this load (1: the best is the only one)")
    sentence: str


class BreakEvenOut(BaseModel):
    k: int
    pays: Pays = Field(description="everywhere / nowhere (every interval above / below 1), up_to (crosses 1), undecided")
    load: float | None = Field(description="Where the speedup crosses 1, interpolated on log load (up_to only)")
    low: int | None = Field(description="The largest load whose interval lies wholly above 1; null: none")
    high: int | None = Field(description="The smallest load whose interval lies wholly below 1; null: none")
    why: str
    sentence: str


class SpeedupLineOut(BaseModel):
    """One GPU kind x method x backend x resolved graph mode x build (and all else measured but k and load)."""

    title: str
    build: str
    gpu_kind: str
    method: str
    name: str
    backend: str
    resolved_graph_mode: str
    mode: str
    ks: list[int]
    loads: list[int]
    cells: list[SpeedupCellOut]
    best: list[BestKOut]
    break_even: list[BreakEvenOut]
    one_k: list[int] = Field(description="Loads where one k alone ran: the counters' prediction needs two")
    scheduler: str | None = Field(description="Which k ran without vLLM's asynchronous scheduling beside baselines that had it")
    counting: str | None = Field(description="Set where the line's starts were measured by the serving runner before cell "
                                             "schema 5, which left the tokens of streams without text out of tokens/s")
