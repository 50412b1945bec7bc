"""Path parameters more than one domain's routes take."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from app.core.names import MAX_BIGINT, MAX_NAME_LENGTH, NAME_PATTERN

QueuePath = Annotated[
    str, Path(pattern=NAME_PATTERN, max_length=MAX_NAME_LENGTH, description="Queue name.")
]
JobIdPath = Annotated[int, Path(ge=1, le=MAX_BIGINT)]
