"""Every named statement of every repository runs with a NamedTuple of exactly its
parameters: each `:name` in its SQL is a field, and each field a `:name` it uses.

The repositories are found, not listed (tests/fixtures/queries.py): the `repository`
module beside each domain's `.sql` files.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from app.db.statement import Queries, Statement, fields_of
from app.jobs.params import (
    AckColumns,
    AckParams,
    Defaults,
    EnqueueOneParams,
    FinishManyParams,
    FinishOneParams,
    JobFilter,
    ListJobsParams,
    NewJob,
)
from tests.fixtures.queries import REPOSITORIES


def _bound(module: ModuleType) -> dict[str, Statement[Any]]:
    """The statements a repository binds at module level, by statement name."""
    return {
        value.name: value
        for name, value in vars(module).items()
        if isinstance(value, Statement) and name.isupper()
    }


def test_every_domain_with_a_repository_is_found() -> None:
    names = {module.__name__ for module in REPOSITORIES}
    domains = ("jobs", "queues", "keys", "maintenance", "schedules")
    assert names >= {f"app.{domain}.repository" for domain in domains}


@pytest.mark.parametrize("module", REPOSITORIES, ids=lambda m: m.__name__)
def test_every_statement_is_bound_to_a_parameters_type(module: ModuleType) -> None:
    queries: Queries = module.QUERIES
    bound = _bound(module)
    assert set(bound) == set(queries.statements), "each statement of the files is bound"
    for name, value in vars(module).items():
        if isinstance(value, Statement) and name.isupper():
            assert name == value.name.upper(), "a statement is bound under its own name"
    untyped = [name for name, statement in bound.items() if statement.params is None]
    assert untyped == [], "bound with QUERIES.bind(name, Params)"


@pytest.mark.parametrize("module", REPOSITORIES, ids=lambda m: m.__name__)
def test_each_parameter_is_a_field_and_each_field_a_parameter(module: ModuleType) -> None:
    for name, statement in _bound(module).items():
        assert statement.params is not None
        fields = fields_of(statement.params)
        assert len(set(fields)) == len(fields)
        unbound = set(statement.names) - set(fields)
        unused = set(fields) - set(statement.names)
        assert (unbound, unused) == (set(), set()), f"{name}: {statement.params.__name__}"
        # the statement as its file holds it: the same names, the same SQL
        assert statement.names == module.QUERIES[name].names
        assert statement.sql == module.QUERIES[name].sql


@pytest.mark.parametrize(
    ("ack", "statement"), [(AckParams, FinishOneParams), (AckColumns, FinishManyParams)]
)
def test_a_finish_takes_the_ack_then_the_retry_policy_and_key_by_position(
    ack: type[tuple[Any, ...]], statement: type[tuple[Any, ...]]
) -> None:
    # as JobsRepository.finish_one and finish_many build them
    policy = ("backoff_base", "backoff_cap", "backoff_jitter")
    assert fields_of(statement) == (*fields_of(ack), *policy, "key_id")


def test_an_enqueue_takes_the_queue_the_job_then_the_defaults_by_position() -> None:
    # as JobsRepository.enqueue_one builds it
    assert fields_of(EnqueueOneParams) == ("queue", *fields_of(NewJob), *fields_of(Defaults))


def test_a_page_of_jobs_takes_the_filter_then_the_page_and_queues_by_position() -> None:
    # as JobsRepository.page builds it
    page = ("after", "limit", "allowed_names", "allowed_patterns")
    assert fields_of(ListJobsParams) == (*fields_of(JobFilter), *page)
