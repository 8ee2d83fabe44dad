"""The noise model at the API's edge (``/api/v1/noise``): one class's spread of tokens/s between engine starts."""

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field


class DetectableOut(BaseModel):
    starts: int = Field(description="Engine starts on each side")
    effect: float = Field(description="The smallest relative change of tokens/s those starts find at 80 % power, two-sided 5 %")


class NoiseOut(BaseModel):
    """One class of cells (GPU kind x backend x graph mode x draft or none x mode) and the spread of ln tokens/s their
    A/A groups show: every cell of one build with two or more succeeded starts, pooled
    (``s^2 = sum (x - mean_cell)^2 / df``)."""

    gpu_kind: str
    backend: str = Field(description="The attention backend the cells ask for: starts spread differently on each "
                                     "(FLASHINFER's draft cells on an H200 far more than FLASH_ATTN's)")
    graph_mode: str = Field(description="The CUDA-graph mode the cells ask for (not the one that ran)")
    method_class: Literal["draft", "none"] = Field(description="draft: cells with a speculative method; none: baselines")
    mode: str
    concurrency: int | None = Field(description="Serving mode's clients; null offline")
    sd: float = Field(description="s: the pooled standard deviation of ln tokens/s between engine starts")
    cv: float = Field(description="exp(s) - 1: s as a share of the speed")
    df: int = Field(description="Degrees of freedom: the sum over cells of their starts - 1")
    cells: int
    starts: int
    within_sd: float | None = Field(description="The pooled standard deviation of ln tokens/s between one start's rounds")
    within_df: int | None
    within_half_from: int | None = Field(description=(
        "The fewest starts whose rounds hold half of the within-start spread's squared deviations, of within_starts: "
        "far below half of them, the figure rests on a few starts (a round far off its start's others)"))
    within_starts: int | None = Field(description="The starts the within-start spread pools (two rounds or more each)")
    within_uneven: bool = Field(description=(
        "Whether one start's rounds spread far beyond the others' (Cochran's C test at 1 %, each start with its own "
        "degrees of freedom): then the within-start spread rests on a few starts, within_half_from says how few"))
    paired_sd: float | None = Field(description="The spread of ln tokens/s between the two halves of A/A pairs (starts of one "
                                               "build run back to back): what a paired comparison's difference carries")
    paired_df: int | None = Field(description="Its degrees of freedom: the A/A pairs")
    min_detectable: list[DetectableOut]
    newest: datetime | None = Field(description="When the newest start pooled finished")
    oldest: datetime | None = Field(default=None, description="When the first start pooled finished")
    hosts: list[str] = Field(description="The workers' hosts that ran its starts (none for imported ones)")
    gpu_names: list[str]
    builds: list[str] = Field(default_factory=list, description="The builds whose starts it pools")
    sweep_ids: list[int] = Field(default_factory=list, description="The sweeps that ran the starts it pools")
