"""Service settings, read from ``DRAFTBENCH_*`` environment variables."""

import json
from functools import lru_cache
from typing import Annotated

from pydantic import field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAFTBENCH_")

    database_url: str = "sqlite:///draftbench.db"
    # The bootstrap admin token (every scope); tokens made with `draftbench token create` sit in
    # the database. Empty means only database tokens are accepted: never anonymous writes.
    token: str = ""
    max_cells: int = 2000
    max_body_bytes: int = 1024 * 1024
    max_log_bytes: int = 32 * 1024 * 1024
    # A running job whose lease is not renewed for this long goes back to the queue.
    lease_seconds: float = 120.0
    max_attempts: int = 3
    # A worker that has not been heard from for this long is shown as lost.
    worker_stale_seconds: float = 300.0
    # Folders that model/tokenizer/draft paths and datasets of a sweep must resolve into (comma
    # separated or a JSON list). Empty allows any path, for local use; production sets both.
    allowed_model_roots: Annotated[list[str], NoDecode] = []
    allowed_dataset_roots: Annotated[list[str], NoDecode] = []
    # Authenticated writes per token and minute, per service process; 0 turns the limit off.
    rate_limit_per_minute: int = 600

    @field_validator("allowed_model_roots", "allowed_dataset_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip()
            if value.startswith("["):
                return json.loads(value)
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


@lru_cache
def get_settings() -> Settings:
    return Settings()
