"""Service settings, read from ``DRAFTBENCH_*`` environment variables."""

from functools import lru_cache

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAFTBENCH_")

    database_url: str = "sqlite:///draftbench.db"
    # Bearer token for every write. Empty means writes are refused: a service that forgot its
    # token must not accept anonymous workers.
    token: str = ""
    max_cells: int = 2000
    max_body_bytes: int = 1024 * 1024
    max_log_bytes: int = 32 * 1024 * 1024
    # A running job whose lease is not renewed for this long goes back to the queue.
    lease_seconds: float = 120.0
    max_attempts: int = 3
    # A worker that has not been heard from for this long is shown as lost.
    worker_stale_seconds: float = 300.0


@lru_cache
def get_settings() -> Settings:
    return Settings()
