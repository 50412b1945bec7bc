"""The rules of queues: operator actions, settings, statistics. Knows nothing of HTTP."""

from __future__ import annotations

from dataclasses import dataclass

from app.push import PushHealthService, PushTargets
from app.queues.repository import QueuesRepository
from app.queues.service.admin import QueueAdmin
from app.queues.service.settings import QueueSettingsService, SettingsChange
from app.queues.service.stats import Snapshot, StatsService

__all__ = ["QueueServices", "SettingsChange", "Snapshot"]


@dataclass(frozen=True, slots=True)
class QueueServices:
    """Everything the queues' routes call."""

    admin: QueueAdmin
    settings: QueueSettingsService
    stats: StatsService
    push: PushTargets
    push_health: PushHealthService

    @classmethod
    def build(
        cls,
        repo: QueuesRepository,
        push: PushTargets,
        push_health: PushHealthService,
        *,
        stats_refresh_seconds: float,
    ) -> QueueServices:
        return cls(
            admin=QueueAdmin(repo),
            settings=QueueSettingsService(repo),
            stats=StatsService(repo, refresh_seconds=stats_refresh_seconds),
            push=push,
            push_health=push_health,
        )
