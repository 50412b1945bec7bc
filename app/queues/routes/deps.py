"""The queues' services, as the `Annotated` dependency their routes declare."""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request

from app.queues.service import QueueServices


async def _queues(request: Request) -> QueueServices:
    return cast(QueueServices, request.app.state.queues)


QueuesDep = Annotated[QueueServices, Depends(_queues)]
