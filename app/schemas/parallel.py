"""Tensor-parallel cells at the API's edge (``/api/v1/parallel``): each beside its one-GPU twin (``app.cells.parallel``)."""

from pydantic import BaseModel, Field


class ParallelOut(BaseModel):
    gpu_kind: str
    backend: str
    graph_mode: str
    build: str
    label: str = Field(description="The tensor-parallel cell's label")
    tensor_parallel_size: int | None = Field(description="The target's, as the cell asked it; null: unset (one)")
    draft_tensor_parallel_size: int | None = Field(description="The draft's, as the cell asked it; null: unset")
    acceptance: float | None = Field(description="Accepted over draft tokens, the starts pooled; null without drafts")
    one_gpu_acceptance: float | None
    acceptance_difference: float | None = Field(description="acceptance - one_gpu_acceptance")
    acceptance_difference_low: float | None = Field(description="Newcombe's 95 % interval of the difference")
    acceptance_difference_high: float | None
    acceptance_p_value: float | None = Field(description="The pooled two-proportion z test's")
    acceptance_differs: bool | None = Field(description="p under 0.002 and at least 2 points apart (the verdicts' rule); "
                                                        "null without drafts on either side")
    speed_ratio: float | None = Field(description="tokens/s over the one-GPU twin's")
    speed_ratio_low: float | None = Field(description="95 % interval of the ratio of two pooled cells")
    speed_ratio_high: float | None
    starts: int
    one_gpu_starts: int
    jobs: list[int]
    one_gpu_jobs: list[int]
    sentence: str
