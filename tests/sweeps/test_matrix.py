"""The canonical cell and its hash: what a job stores, and why stored hashes survive new fields."""

import json
import sqlite3
from pathlib import Path

from app.schemas.sweep import SweepSpec
from app.sweeps import matrix
from tests.factories import sweep_body

PROOF = Path(__file__).resolve().parents[1] / "data" / "h200-proof-2026-11-30" / "proof.sqlite"


def _cells(**workload: object) -> list[matrix.Cell]:
    body = sweep_body("draftbench", repeats=1)
    body["workload"] = {**body.get("workload", {}), **workload}
    return matrix.expand(SweepSpec.model_validate(body))


def test_the_h200_sweeps_stored_before_request_seeds_existed_expand_to_their_stored_hashes() -> None:
    connection = sqlite3.connect(f"file:{PROOF}?mode=ro", uri=True)
    for sweep_id, spec in connection.execute("SELECT id, spec FROM sweeps"):
        stored = dict(connection.execute("SELECT cell_index, config_hash FROM jobs WHERE sweep_id = ? AND repeat = 0",
                                         (sweep_id,)).fetchall())
        cells = matrix.expand(SweepSpec.model_validate(json.loads(spec)))
        assert {cell.index: matrix.config_hash(cell.spec) for cell in cells} == stored


def test_request_seeds_is_left_out_at_its_default_and_changes_the_hash_when_off() -> None:
    seeded, unseeded = _cells()[0], _cells(request_seeds=False)[0]
    assert "request_seeds" not in matrix.canonical(seeded.spec)["workload"]
    assert matrix.canonical(unseeded.spec)["workload"]["request_seeds"] is False
    assert matrix.config_hash(seeded.spec) != matrix.config_hash(unseeded.spec)
    # What the job stores validates back to the same cell.
    assert matrix.canonical(type(seeded.spec).model_validate(matrix.canonical(seeded.spec))) == matrix.canonical(seeded.spec)


def test_the_warm_up_defaults_to_one_whole_pass_and_an_explicit_count_stays() -> None:
    assert _cells(num_prompts=12)[0].spec.workload.warmup_prompts == 12
    assert _cells(num_prompts=12, warmup_prompts=3)[0].spec.workload.warmup_prompts == 3
    assert _cells(num_prompts=12, warmup_prompts=0)[0].spec.workload.warmup_prompts == 0


def test_the_h200_sweeps_stored_before_lists_of_k_existed_dump_as_they_were_stored() -> None:
    # A plain integer k reads and dumps as it always did: the stored spec, and so the Idempotency-Key's hash.
    connection = sqlite3.connect(f"file:{PROOF}?mode=ro", uri=True)
    specs = [json.loads(spec) for (spec,) in connection.execute("SELECT spec FROM sweeps")]
    assert specs and all(isinstance(s["speculative"][0]["num_speculative_tokens"], int) for s in specs)
    assert [SweepSpec.model_validate(spec).model_dump(mode="json") for spec in specs] == specs
