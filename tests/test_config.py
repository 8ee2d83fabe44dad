"""Settings read from the environment: lists given as text, and the trusted proxies."""

from ipaddress import ip_network

import pytest
from pydantic import ValidationError

from app.config import Settings


@pytest.mark.parametrize("text", ["127.0.0.1, 10.0.0.0/8,fd00::/8", '["127.0.0.1", "10.0.0.0/8", "fd00::/8"]'])
def test_trusted_proxies_are_a_comma_separated_or_json_list(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("DRAFTBENCH_TRUSTED_PROXIES", text)
    assert Settings().trusted_proxies == [ip_network("127.0.0.1/32"), ip_network("10.0.0.0/8"), ip_network("fd00::/8")]


def test_no_proxy_is_trusted_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRAFTBENCH_TRUSTED_PROXIES", raising=False)
    assert Settings().trusted_proxies == []


@pytest.mark.parametrize("text", ["proxy.local", "10.0.0.1/8", "10.0.0.0/33", "300.1.1.1", "[1", '["10.0.0.0/8", 7]'])
def test_a_bad_trusted_proxy_is_refused_naming_the_setting(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("DRAFTBENCH_TRUSTED_PROXIES", text)
    with pytest.raises(ValidationError, match="trusted_proxies"):
        Settings()


@pytest.mark.parametrize("name", ["DRAFTBENCH_MAX_JOBS", "DRAFTBENCH_MAX_CELLS"])
def test_the_job_limit_is_read_under_its_name_and_the_one_it_had(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "7")
    assert Settings().max_jobs == 7
    assert Settings(max_jobs=3).max_jobs == 3
