"""jsonb through the service's pool, read in text form by pydantic's parser: values come
back as Python reads their JSON, a parameter is the JSON text the service sends, and
nothing else is taken for one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import asyncpg
import pydantic_core
import pytest

from app.db.database import Database
from app.db.engine import create_engine
from app.db.statement import compile_sql


class RoundTrip(NamedTuple):
    one: Any  # JSON text; a test sends other values, which the driver refuses
    many: list[str | None]


ROUND_TRIP = compile_sql(
    "round_trip",
    "SELECT CAST(:one AS jsonb) AS one, CAST(:many AS jsonb[]) AS many, "
    "CAST(NULL AS jsonb) AS missing",
).bound(RoundTrip)


@pytest.fixture
async def database(database_url: str) -> AsyncIterator[Database]:
    engine = create_engine(database_url, 2)
    yield Database(engine)
    await engine.dispose()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"b": [1, 2.5, "s", true, null], "a": {}}', {"a": {}, "b": [1, 2.5, "s", True, None]}),
        ('"\\u00e9 \\ud83d\\ude00 \\n \\" \\\\"', 'é 😀 \n " \\'),
        ("12345678901234567890123", 12345678901234567890123),
        ("-0.000001", -0.000001),
        ("null", None),
        ("[]", []),
    ],
    ids=["object", "string", "big-integer", "float", "null", "empty-array"],
)
async def test_a_value_comes_back_as_python_reads_it(
    database: Database, text: str, value: Any
) -> None:
    (row,) = await database.fetch(ROUND_TRIP, RoundTrip(text, [text, "null", None]))
    assert row["one"] == value
    assert row["many"] == [value, None, None]  # a jsonb null, then SQL's NULL
    assert row["missing"] is None


async def test_the_service_s_codec_reads_jsonb(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = create_engine(database_url, 1)
    read: list[str] = []
    original = pydantic_core.from_json

    def parse(text: str) -> Any:
        read.append(text)
        return original(text)

    # a connection made from now on finds this one, if it sets its own codec
    monkeypatch.setattr(pydantic_core, "from_json", parse)
    try:
        (row,) = await Database(engine).fetch(ROUND_TRIP, RoundTrip('{"a": 1}', []))
    finally:
        await engine.dispose()
    assert row["one"] == {"a": 1}
    assert read == ['{"a": 1}']


async def test_a_parameter_must_already_be_json_text(database: Database) -> None:
    for wrong in ({"a": 1}, [1], 1):
        with pytest.raises(asyncpg.DataError):
            await database.fetch(ROUND_TRIP, RoundTrip(wrong, []))
    with pytest.raises(asyncpg.InvalidTextRepresentationError):
        await database.fetch(ROUND_TRIP, RoundTrip("{not json", []))
