"""A worker registers how its builds were made, and no later worker can say otherwise."""

from pathlib import Path

from app.builds import patched
from runners.worker import Build
from tests.builds.conftest import PROPOSER, diff
from tests.conftest import AUTH


def test_a_worker_registers_a_patched_builds_facts(client, tmp_path: Path, base_python: Path) -> None:
    patch = tmp_path / "pr.diff"
    patch.write_text(diff("vllm/v1/proposer.py", PROPOSER, "def propose(tokens):\n    return []\n"))
    facts = patched.create(label="pr-1", base=str(base_python), patch=patch, root=tmp_path / "builds", commit="abc123")
    infos = [Build("pr-1", tmp_path / "builds" / "pr-1" / "python").info(), Build("base", base_python).info()]
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [i.model_dump(mode="json") for i in infos]}
    assert client.post("/api/v1/workers", json=body, headers=AUTH).status_code == 201
    builds = {b["label"]: b for b in client.get("/api/v1/builds").json()}
    assert {k: builds["pr-1"][k] for k in ("kind", "base", "patch_sha256", "commit", "vllm_version")} == {
        "kind": "patch", "base": str(base_python), "patch_sha256": facts.patch_sha256, "commit": "abc123",
        "vllm_version": "0.32.0"}
    # An interpreter installed by hand has no build.json: its facts stay empty.
    assert (builds["base"]["kind"], builds["base"]["patch_sha256"]) == (None, None)


def test_no_worker_can_register_another_patch_under_a_label(client) -> None:
    def body(sha: str) -> dict:
        return {"name": "w", "host": "h", "gpu_kinds": ["cpu"],
                "builds": [{"label": "pr-1", "vllm_version": "0.32.0", "kind": "patch", "patch_sha256": sha}]}

    assert client.post("/api/v1/workers", json=body("a" * 64), headers=AUTH).status_code == 201
    refused = client.post("/api/v1/workers", json=body("b" * 64), headers=AUTH)
    assert refused.status_code == 409 and "patch_sha256 " + "a" * 64 in refused.json()["detail"]


def test_bad_facts_name_the_field(client) -> None:
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "pr-1", "kind": "tarball"}]}
    refused = client.post("/api/v1/workers", json=body, headers=AUTH)
    assert refused.status_code == 422 and "kind" in refused.text and "patch" in refused.text
