"""Settings: `JOBQ_` variables, defaults, and limits that cannot be raised past the API."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.core.config import Settings


def test_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBQ_REAPER_INTERVAL_SECONDS", "0.5")
    monkeypatch.setenv("JOBQ_MAX_PAYLOAD_BYTES", "1024")
    monkeypatch.setenv("JOBQ_MIGRATE_ON_START", "false")
    settings = Settings()
    assert settings.reaper_interval_seconds == 0.5
    assert settings.max_payload_bytes == 1024
    assert settings.migrate_on_start is False


def test_documented_defaults() -> None:
    settings = Settings(database_url=None)
    assert settings.reaper_interval_seconds == 5
    assert settings.max_payload_bytes == 256 * 1024
    assert (settings.max_enqueue_batch, settings.max_ack_batch) == (1000, 1000)
    assert (settings.max_lease_batch, settings.max_lease_seconds) == (100, 43_200)
    assert settings.max_error_message_bytes == 8 * 1024


@pytest.mark.parametrize(
    "override",
    [
        {"max_enqueue_batch": 1001},
        {"max_ack_batch": 5000},
        {"max_lease_batch": 101},
        {"max_lease_seconds": 43_201},
        {"default_lease_seconds": 120, "max_lease_seconds": 60},
        {"max_payload_bytes": 2_000_000, "max_request_bytes": 1_000_000},
        {"reaper_interval_seconds": 0},
    ],
)
def test_limits_past_the_api_bounds_are_refused_at_start(override: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        Settings(**override)  # type: ignore[arg-type]
