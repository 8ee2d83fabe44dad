"""runners/cellkit.py's energy meter: NVML's counters read around each measured round, against a fake NVML module
standing in for the driver (the engine's boundary: no GPU here), and the meter's reason where it cannot read."""

from collections.abc import Iterator

import pytest

from runners import cellkit


class NotSupported(Exception):
    """What pynvml raises for a call the GPU does not offer (``NVMLError_NotSupported`` prints as this)."""

    def __str__(self) -> str:
        return "Not Supported"


class FakeNvml:
    """Two or more GPUs by index and UUID, each with its own sequence of energy readings (millijoules), as
    ``vllm.third_party.pynvml`` offers them; ``init_error`` fails ``nvmlInit`` as a host without a driver does."""

    def __init__(self, readings: dict[str, list[int]], init_error: Exception | None = None, unsupported: bool = False):
        self.uuids = list(readings)
        self.readings: dict[str, Iterator[int]] = {uuid: iter(values) for uuid, values in readings.items()}
        self.init_error, self.unsupported = init_error, unsupported
        self.opened: list[str] = []

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self.opened.append(f"index {index}")
        return self.uuids[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.opened.append(f"uuid {uuid}")
        if uuid not in self.uuids:
            raise LookupError("Not Found")
        return uuid

    def nvmlDeviceGetUUID(self, handle: str) -> bytes:
        return handle.encode()  # pynvml gives bytes

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        if self.unsupported:
            raise NotSupported()
        return next(self.readings[handle])


GPU = {"gpu_kind": "H200", "engine_args": {}}
TP2 = {"gpu_kind": "H200", "engine_args": {"tensor_parallel_size": 2}}


def _windows(*tokens: int):
    found = iter([{"seconds": 1.0, "output_tokens": t, "num_requests": 1} for t in tokens])
    return lambda: next(found)


def test_each_round_gets_the_joules_its_gpu_counted_across_it() -> None:
    nvml = FakeNvml({"GPU-a": [1_000_000, 1_250_000, 1_300_000, 1_700_500]})
    meter = cellkit.energy_meter(GPU, None, nvml)
    rounds = cellkit.timed_rounds(_windows(500, 800), read=None, count=2, meter=meter)
    # 1,250,000 - 1,000,000 mJ = 250 J; 1,700,500 - 1,300,000 mJ = 400.5 J (the gap between rounds is not counted).
    assert [r["energy_j"] for r in rounds] == [250.0, 400.5]
    assert cellkit.energy_of(rounds, meter) == {"joules": 650.5, "gpus": ["GPU-a"], "reason": None}


def test_a_tensor_parallel_cell_sums_its_gpus_named_by_index_or_uuid() -> None:
    readings = {"GPU-a": [1000, 3000], "GPU-b": [50_000, 54_000], "GPU-c": [0, 10**9]}
    for visible in ("0,1", "GPU-a,GPU-b", "0,GPU-b,2"):
        nvml = FakeNvml({uuid: list(values) for uuid, values in readings.items()})
        meter = cellkit.energy_meter(TP2, visible, nvml)
        assert meter.gpus == ["GPU-a", "GPU-b"], visible  # the first two the cell sees; GPU-c is not its own
        [one] = cellkit.timed_rounds(_windows(100), read=None, count=1, meter=meter)
        assert one["energy_j"] == (2000 + 4000) / 1000


def test_without_cuda_visible_devices_the_cell_uses_the_first_gpus_by_index() -> None:
    nvml = FakeNvml({"GPU-a": [0], "GPU-b": [0], "GPU-c": [0]})
    assert cellkit.energy_meter(TP2, None, nvml).gpus == ["GPU-a", "GPU-b"]
    assert nvml.opened == ["index 0", "index 1"]


def test_a_counter_that_goes_back_is_no_energy_and_says_why() -> None:
    # A driver reload (or a wrap of the 64-bit counter) between the readings of the second round.
    nvml = FakeNvml({"GPU-a": [5000, 9000, 9500, 200, 300, 800]})
    meter = cellkit.energy_meter(GPU, "0", nvml)
    rounds = cellkit.timed_rounds(_windows(10, 10, 10), read=None, count=3, meter=meter)
    assert [r["energy_j"] for r in rounds] == [4.0, None, None]  # nothing read after: the meter stopped
    energy = cellkit.energy_of(rounds, meter)
    assert energy["joules"] is None
    assert energy["reason"] == "not reported (the energy counter went back from 9500 to 200 mJ (wrapped, or the driver reloaded))"


def test_an_unsupported_counter_is_null_energy_with_nvmls_words_and_the_rounds_still_run() -> None:
    meter = cellkit.energy_meter(GPU, "0", FakeNvml({"GPU-a": []}, unsupported=True))
    rounds = cellkit.timed_rounds(_windows(10, 20), read=None, count=2, meter=meter)
    assert [r["output_tokens"] for r in rounds] == [10, 20] and [r["energy_j"] for r in rounds] == [None, None]
    assert cellkit.energy_of(rounds, meter) == {"joules": None, "gpus": ["GPU-a"], "reason": "not reported (NVML: Not Supported)"}


@pytest.mark.parametrize(("spec", "visible", "nvml", "reason"), [
    (GPU, "0", FakeNvml({}, init_error=RuntimeError("NVML Shared Library Not Found")), "NVML: NVML Shared Library Not Found"),
    (GPU, "GPU-zzz", FakeNvml({"GPU-a": [0]}), "NVML: Not Found"),
    (TP2, "0", FakeNvml({"GPU-a": [0]}), "2 GPUs used but CUDA_VISIBLE_DEVICES names 1"),
    ({"gpu_kind": "cpu"}, None, FakeNvml({"GPU-a": [0]}), "the CPU engine"),
])
def test_a_meter_that_cannot_open_reads_nothing_and_keeps_why(spec: dict, visible: str | None, nvml: FakeNvml, reason: str) -> None:
    meter = cellkit.energy_meter(spec, visible, nvml)
    assert meter.read() is None and meter.reason == reason
    assert cellkit.energy_of([{"energy_j": None}], meter)["reason"] == f"not reported ({reason})"


def test_without_a_meter_rounds_are_as_they_were() -> None:
    [one] = cellkit.timed_rounds(_windows(10), read=None, count=1)
    assert "energy_j" not in one
