"""GPU names as nvidia-smi prints them -> GPU kinds; picking and grouping a host's GPUs."""

import pytest

from app.enums import GpuKind
from runners import gpus
from runners.gpus import Gpu, GpuError

SMI = """\
0, GPU-aaaaaaaa-0000-0000-0000-000000000000, NVIDIA H200
1, GPU-bbbbbbbb-0000-0000-0000-000000000000, NVIDIA H200
2, GPU-cccccccc-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3
"""


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("NVIDIA H200", GpuKind.H200),
        ("NVIDIA H200 NVL", GpuKind.H200),
        ("NVIDIA H100 80GB HBM3", GpuKind.H100),
        ("NVIDIA H100 PCIe", GpuKind.H100),
        ("NVIDIA H20", GpuKind.H20),
        ("NVIDIA H20-3e", GpuKind.H20),
        ("NVIDIA A100-SXM4-80GB", GpuKind.A100),
        ("NVIDIA A100 80GB PCIe", GpuKind.A100),
        ("NVIDIA L4", GpuKind.L4),
        ("NVIDIA L40S", GpuKind.L40S),
        ("NVIDIA B200", GpuKind.B200),
        ("NVIDIA GB200", GpuKind.GB200),
        ("NVIDIA B300 SXM6 AC", GpuKind.B300),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", GpuKind.RTX_PRO_6000),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", GpuKind.RTX_PRO_6000),
        ("NVIDIA GeForce RTX PRO 6000", GpuKind.RTX_PRO_6000),
        ("AMD Instinct MI300X", GpuKind.MI300X),
        ("  nvidia h200  ", GpuKind.H200),
    ],
)
def test_known_names_map_to_their_kind(name: str, kind: GpuKind) -> None:
    assert gpus.kind_of(name) is kind


@pytest.mark.parametrize(
    "name",
    ["NVIDIA L40", "NVIDIA GH200 480GB", "NVIDIA RTX 6000 Ada Generation", "NVIDIA GeForce RTX 4090", "Tesla T4", ""],
)
def test_unknown_names_are_none_not_a_near_miss(name: str) -> None:
    # The old substring match read "H20" inside "H200"-like names; whole words only now.
    assert gpus.kind_of(name) is None


def test_h20_is_not_read_inside_h200_nor_b200_inside_gb200() -> None:
    assert gpus.kind_of("NVIDIA H200") is GpuKind.H200
    assert gpus.kind_of("NVIDIA GB200") is GpuKind.GB200


def test_parse_nvidia_smi_rows() -> None:
    rows = gpus.parse_nvidia_smi(SMI + "\n")
    assert [g.index for g in rows] == ["0", "1", "2"]
    assert rows[2] == Gpu(index="2", uuid="GPU-cccccccc-0000-0000-0000-000000000000", name="NVIDIA H100 80GB HBM3")
    assert [g.kind for g in rows] == [GpuKind.H200, GpuKind.H200, GpuKind.H100]
    with pytest.raises(GpuError, match="unexpected"):
        gpus.parse_nvidia_smi("NVIDIA H200\n")


def test_pick_by_index_or_uuid_and_refuse_a_missing_one() -> None:
    rows = gpus.parse_nvidia_smi(SMI)
    assert [g.index for g in gpus.pick(rows, ["1", "GPU-aaaaaaaa-0000-0000-0000-000000000000"])] == ["1", "0"]
    with pytest.raises(GpuError, match=r"no GPU '7'.*0 \(NVIDIA H200\)"):
        gpus.pick(rows, ["7"])


def test_a_group_has_one_known_kind() -> None:
    rows = gpus.parse_nvidia_smi(SMI)
    assert gpus.kinds_of(rows[:2]) == [GpuKind.H200]
    with pytest.raises(GpuError, match="different kinds"):
        gpus.kinds_of(rows)
    with pytest.raises(GpuError, match="--gpu-kind"):
        gpus.kinds_of([Gpu("0", "GPU-x", "NVIDIA L40")])


def test_parse_ids() -> None:
    assert gpus.parse_ids("0") == ["0"]
    assert gpus.parse_ids(" 0, 1 ") == ["0", "1"]
    for bad in ("", ",", "0,0"):
        with pytest.raises(GpuError):
            gpus.parse_ids(bad)


def test_groups_split_evenly_or_refuse() -> None:
    ids = [str(i) for i in range(8)]
    assert gpus.groups(ids, 1) == [[i] for i in ids]
    assert gpus.groups(ids, 2) == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"]]
    with pytest.raises(GpuError, match="cannot be split"):
        gpus.groups(ids, 3)
    with pytest.raises(GpuError, match="at least 1"):
        gpus.groups(ids, 0)


def test_memory_used_is_read_per_gpu_under_its_index_and_its_uuid() -> None:
    text = "0, GPU-aaa, 81234\n1, GPU-bbb, 0\n"
    assert gpus.parse_memory_used(text) == {"0": 81234, "GPU-aaa": 81234, "1": 0, "GPU-bbb": 0}
    with pytest.raises(gpus.GpuError, match="unexpected nvidia-smi line"):
        gpus.parse_memory_used("0, GPU-aaa, [N/A]\n")


def test_the_next_cell_waits_until_the_last_ones_memory_is_back() -> None:
    # The killed engine's 84 GiB come back over three reads; GPU 1 (not the cell's) stays busy and is not waited for.
    reads = iter([{"0": 86_000, "1": 50_000}, {"0": 40_000, "1": 50_000}, {"0": 1_500, "1": 50_000}])
    clock = [0.0]
    waited = gpus.wait_for_release({"0": 600}, read=lambda: next(reads), poll_s=0.5, clock=lambda: clock[0],
                                   sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    assert waited == 1.0  # two sleeps of 0.5 s; 1500 MiB is within 600 + 1024


def test_memory_that_never_comes_back_is_waited_for_at_most_the_timeout() -> None:
    clock = [0.0]
    waited = gpus.wait_for_release({"0": 600}, read=lambda: {"0": 90_000}, timeout_s=60, poll_s=0.5,
                                   clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    assert waited == 60.0
