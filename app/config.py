"""Service settings, read from ``DRAFTBENCH_*`` environment variables, and the defaults every entry point shares."""

import json
from functools import lru_cache
from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import Annotated

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///draftbench.db"
DEFAULT_SERVER = "http://127.0.0.1:8000"
# A cell running longer than this is killed and recorded as a crash of kind "timeout".
DEFAULT_CELL_TIMEOUT_S = 900.0


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAFTBENCH_", populate_by_name=True)

    database_url: str = DEFAULT_DATABASE_URL
    # The bootstrap admin token (every scope); tokens made with `draftbench token create` sit in
    # the database. Empty means only database tokens are accepted: never anonymous writes.
    token: str = ""
    # Jobs a sweep may have (its cells x repeats); DRAFTBENCH_MAX_CELLS is the name it had before.
    max_jobs: int = Field(default=2000, validation_alias=AliasChoices("DRAFTBENCH_MAX_JOBS", "DRAFTBENCH_MAX_CELLS"))
    max_body_bytes: int = 1024 * 1024
    max_log_bytes: int = 32 * 1024 * 1024
    # The one liveness rule (app.workers.liveness): a worker is alive while its last heartbeat or
    # claim is younger than this; the jobs of a worker that is not alive are stalled and go back to
    # the queue (app.jobs.stalled) at the next check, which runs every ``stall_check_seconds``.
    lease_seconds: float = 120.0
    stall_check_seconds: float = 15.0
    max_attempts: int = 3
    # Folders that model/tokenizer/draft paths and datasets of a sweep must resolve into (comma
    # separated or a JSON list). Empty allows any path, for local use; production sets both.
    allowed_model_roots: Annotated[list[str], NoDecode] = []
    allowed_dataset_roots: Annotated[list[str], NoDecode] = []
    # Authenticated writes per token and minute, per service process; 0 turns the limit off.
    rate_limit_per_minute: int = 600
    # Failed authentications per client address and minute, counted before any secret is looked at;
    # 0 turns it off. Far below the writes' limit: a client holding a token does not fail thirty
    # times a minute, and a guesser gets no more tries than that.
    failed_auth_per_minute: int = 30
    # Proxies (addresses or CIDR networks, comma separated or a JSON list) whose X-Forwarded-For is
    # read for the client's address (app.auth.addresses). Empty trusts no forwarded header.
    trusted_proxies: Annotated[list[IPv4Network | IPv6Network], NoDecode] = []

    @field_validator("allowed_model_roots", "allowed_dataset_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip()
            if value.startswith("["):
                return json.loads(value)
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _networks(cls, value: object) -> object:
        value = cls._split_roots(value)
        if not isinstance(value, list):
            return value
        networks = []
        for item in value:
            try:
                networks.append(ip_network(str(item).strip()))
            except ValueError as exc:
                raise ValueError(f"{item!r} is not an IP address or a network such as 10.0.0.0/8 ({exc})") from None
        return networks


@lru_cache
def get_settings() -> Settings:
    return Settings()
