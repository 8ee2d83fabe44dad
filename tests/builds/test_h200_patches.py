"""The H200 example patches (examples/h200/*.diff, for vLLM 0.26.0) as ``build create --patch`` takes them.

vLLM 0.26.0's sources are not here (a 300 MB wheel): the base is a package whose files hold each hunk's
lines as the patch quotes them, at the lines the hunk names, and the real patch step runs on it. That those
lines are 0.26.0's was checked on the unpacked wheel (``patch --dry-run`` and ``build create``: see
examples/h200/README.md).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.builds import diffs, patched

H200 = Path(__file__).resolve().parents[2] / "examples" / "h200"
# Each example: the files it changes and, hunk by hunk, the function or class its hunk header names ("" where the
# hunk names none: the imports at the top of a file, or a hunk written without one).
SLOW_DRAFTING = {
    "vllm/v1/spec_decode/llm_base_proposer.py": ["", "def propose("],
    "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py": ["", "def propose("],
}
WHERE = {
    "slow-drafting-3.5ms.diff": SLOW_DRAFTING,
    "slow-drafting-9ms.diff": SLOW_DRAFTING,
    "slow-drafting-gpu-3.8ms.diff": SLOW_DRAFTING,
    "slow-drafting-gpu-5ms.diff": SLOW_DRAFTING,
    "slow-drafting-gpu-7ms.diff": SLOW_DRAFTING,
    "slow-drafting-gpu-11.5ms.diff": SLOW_DRAFTING,
    "dflash-draft-eager.diff": {
        "vllm/v1/attention/backends/flash_attn.py": ["def get_cudagraph_support("],
        "vllm/v1/attention/backends/triton_attn.py": [
            "class TritonAttentionMetadataBuilder(AttentionMetadataBuilder[TritonAttentionMetadata]):"
        ],
    },
    "flashinfer-claims-full-graphs.diff": {"vllm/v1/attention/backends/flashinfer.py": [""]},
}
_HUNK = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)")
_SLEEP = re.compile(r"time\.sleep\(([\d.]+) / 1000\)")
_SPIN = re.compile(r"_draftbench_spin\(([\d.]+)\)")


@dataclass
class Hunk:
    """One hunk of a file's part: where it starts before and after, its header's name, its lines before and after."""

    old_start: int
    new_start: int
    section: str
    old: list[str]
    new: list[str]


def hunks(part: str) -> list[Hunk]:
    """The hunks of one file's part of a unified diff; each one's line counts must match its header."""
    found: list[tuple[Hunk, int, int]] = []
    for line in part.splitlines():
        header = _HUNK.fullmatch(line)
        if header:
            old_count, new_count = (int(n) if n is not None else 1 for n in header.group(2, 4))
            hunk = Hunk(int(header.group(1)), int(header.group(3)), header.group(5), [], [])
            found.append((hunk, old_count, new_count))
        elif found and line[:1] in (" ", "-", "+"):
            hunk = found[-1][0]
            if line[0] != "+":
                hunk.old.append(line[1:])
            if line[0] != "-":
                hunk.new.append(line[1:])
    for hunk, old_count, new_count in found:
        assert (len(hunk.old), len(hunk.new)) == (old_count, new_count), f"hunk at line {hunk.old_start}: counts"
    return [hunk for hunk, _, _ in found]


def _parts(name: str) -> dict[str, list[Hunk]]:
    changes = diffs.for_package(diffs.split((H200 / name).read_text()))
    return {change.path: hunks(change.text) for change in changes}


@pytest.mark.parametrize("name", sorted(WHERE))
def test_each_example_changes_its_files_where_it_says(name: str) -> None:
    assert {path: [h.section for h in parts] for path, parts in _parts(name).items()} == WHERE[name]


@pytest.mark.parametrize("name", sorted(WHERE))
def test_each_example_applies_at_the_lines_it_names(tmp_path: Path, base_python: Path, name: str) -> None:
    package = tmp_path / "base" / "site"
    parts = _parts(name)
    for path, file_hunks in parts.items():
        lines = [f"# line {n} of 0.26.0" for n in range(1, max(h.old_start + len(h.old) for h in file_hunks) + 4)]
        for hunk in file_hunks:
            lines[hunk.old_start - 1:hunk.old_start - 1 + len(hunk.old)] = hunk.old
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text("\n".join(lines) + "\n")
    facts = patched.create(label="h200", base=str(base_python), patch=H200 / name, root=tmp_path / "builds")
    assert facts.patch_files == sorted(parts)
    for path, file_hunks in parts.items():
        built = (tmp_path / "builds" / "h200" / "site" / path).read_text().splitlines()
        for hunk in file_hunks:
            # At the very lines the hunk names: an offset here would be one on 0.26.0 too.
            assert built[hunk.new_start - 1:hunk.new_start - 1 + len(hunk.new)] == hunk.new


# The slow-drafting pairs: each size's file name is PREFIX + milliseconds + "ms.diff", its hooks (the V1 and the V2
# runner's drafter) make one call each with those milliseconds, and its header begins with what a step costs. The sleep
# pair waits for the GPU first; the spin pair must not (the 9 ms sleep's synchronize made it cost about 15 ms a step).
SIZED = {
    "slow-drafting-": (("3.5", "9"), _SLEEP, "costs {} ms more"),
    "slow-drafting-gpu-": (("3.8", "7", "11.5"), _SPIN, "keeps the GPU busy {} ms longer"),
}


@pytest.mark.parametrize("prefix", sorted(SIZED))
def test_the_slow_drafting_sizes_differ_in_their_delay_alone(prefix: str) -> None:
    delays, call, cost = SIZED[prefix]
    bodies = []
    for delay in delays:
        text = (H200 / f"{prefix}{delay}ms.diff").read_text()
        body = text[text.index("--- a/"):]
        assert call.findall(body) == [delay, delay]
        assert text.startswith(f"Every speculative drafting step of vLLM 0.26.0 {cost.format(delay)}")
        assert ("torch.cuda.synchronize" in body) == (call is _SLEEP)
        bodies.append(call.sub(lambda found: found[0].replace(found[1], "D"), body).replace(f" {delay} ms ", " D ms "))
    assert all(body == bodies[0] for body in bodies)
