"""The values the services take are built from the API's bodies field by field: each is
held to its body (and a schedule's to its stored row), so neither can drift alone."""

from __future__ import annotations

from dataclasses import fields

from app.jobs.schemas import ErrorIn, JobIn, LeaseIn, ProgressIn, Ref
from app.jobs.service import AttemptError, ItemRef, JobSpec, Progress, Wanted
from app.schedules.rows import ScheduleRow
from app.schedules.schemas import ScheduleIn
from app.schedules.service import Definition


def _names(value: type) -> list[str]:
    return [field.name for field in fields(value)]


def test_a_schedule_definition_is_its_body_and_what_its_row_stores() -> None:
    assert _names(Definition) == list(ScheduleIn.model_fields)  # built as Definition(**body)
    assert set(_names(Definition)) <= set(ScheduleRow._fields)


def test_the_workers_values_hold_every_field_of_their_bodies() -> None:
    assert set(_names(Wanted)) == set(LeaseIn.model_fields)
    assert _names(Progress) == list(ProgressIn.model_fields)
    assert _names(AttemptError) == list(ErrorIn.model_fields)


def test_a_job_to_enqueue_holds_every_field_of_its_body() -> None:
    assert list(JobSpec._fields) == list(JobIn.model_fields)  # built field by field
    assert list(ItemRef._fields) == list(Ref.model_fields)
