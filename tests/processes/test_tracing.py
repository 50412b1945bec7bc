"""One trace from a producer through jobq to a worker: a Python producer's span enqueues
over HTTP (the SDK sends its trace context), the worker's handler span is its child in
the same trace, and jobq's own spans of the enqueue, the lease and the complete link to
it. With OpenTelemetry's SDK and an in-memory exporter in this process, where the
service runs too (uvicorn, `JOBQ_OPENTELEMETRY` on); the TypeScript worker runs as a
process and prints its spans as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobq_client import AsyncClient, Job, JobRecord, Worker
from tests.helpers import served
from tests.processes.test_sdk_typescript import (  # noqa: F401 - its fixtures, used here
    CLIENT,
    NPM_TIMEOUT_SECONDS,
    WORKER_TIMEOUT_SECONDS,
    _run,
    alone,
    node_modules,
)
from tests.sdk_support import clean_env, eventually

CONSUMER = 4  # @opentelemetry/api's SpanKind.CONSUMER

# The SDK's and the service's spans, which no database mode changes: one CI run of two
pytestmark = pytest.mark.once("server")


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    """Every span this process ends, in memory. OpenTelemetry takes one global tracer
    provider per process: this module's, unless one was set before."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> InMemorySpanExporter:
    exporter.clear()
    return exporter


@contextlib.asynccontextmanager
async def traced_service(app_factory: Callable[..., FastAPI]) -> AsyncIterator[AsyncClient]:
    """The service with OpenTelemetry on, over HTTP, and an SDK client of it."""
    async with served(app_factory(opentelemetry=True)) as url, AsyncClient(url) as jobq:
        yield jobq


async def worked(
    jobq: AsyncClient, queue: str, job_type: str, handler: Callable[[Job], Any], job_id: int
) -> JobRecord:
    """Job `job_id` once a Python SDK worker of `queue` ran `handler` for it to the end."""
    worker = Worker(jobq, queues=[queue], wait_seconds=1)
    worker.handler(job_type)(handler)

    async def probe() -> JobRecord | None:
        job = await jobq.get_job(job_id)
        return job if job.finished else None

    task = asyncio.create_task(worker.run_async())
    try:
        return await eventually(probe, timeout=20)
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in spans.get_finished_spans() if span.name == name]


def linked_to(span: ReadableSpan) -> set[tuple[int, int]]:
    return {(link.context.trace_id, link.context.span_id) for link in span.links}


def assert_jobq_links(spans: InMemorySpanExporter, trace_id: int, span_id: int) -> None:
    """jobq's spans of the enqueue, the lease and the complete link to the producer's
    span; the enqueue's request is the producer's child (its header)."""
    for name in ("jobq.enqueue", "jobq.lease", "jobq.complete"):
        found = [span for span in named(spans, name) if (trace_id, span_id) in linked_to(span)]
        assert found, f"no {name} span links to the producer's"
    (enqueue,) = [s for s in named(spans, "jobq.enqueue") if s.context.trace_id == trace_id]
    by_id = {s.context.span_id: s for s in spans.get_finished_spans()}
    request = enqueue
    while request.parent is not None and request.parent.span_id != span_id:
        request = by_id[request.parent.span_id]  # up to the request's server span
    assert request.kind is trace.SpanKind.SERVER and request.name.startswith("POST")


async def test_a_python_producer_worker_and_jobq_share_one_trace(
    app_factory: Callable[..., FastAPI], spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("tests")
    async with traced_service(app_factory) as jobq:
        with tracer.start_as_current_span("checkout") as producer:
            created = await jobq.enqueue("traced", "email", {"to": "ada"})
        context = producer.get_span_context()
        assert created.job is not None and created.job.trace is not None
        assert created.job.trace.traceparent.startswith(
            f"00-{context.trace_id:032x}-{context.span_id:016x}-"
        )

        seen: list[trace.SpanContext] = []

        async def email(job: Job) -> dict[str, Any]:
            seen.append(trace.get_current_span().get_span_context())
            return {"sent": True}

        assert (await worked(jobq, "traced", "email", email, created.id)).state == "succeeded"

    (handler,) = named(spans, "process traced")
    assert handler.kind is trace.SpanKind.CONSUMER
    assert handler.context.trace_id == context.trace_id
    assert handler.parent is not None and handler.parent.span_id == context.span_id
    assert seen == [handler.context]  # current while the handler ran
    assert handler.attributes is not None
    assert handler.attributes["messaging.message.id"] == str(created.id)
    assert handler.attributes["jobq.job.type"] == "email"
    assert_jobq_links(spans, context.trace_id, context.span_id)


async def test_a_failing_handler_span_records_the_error_and_jobq_links_the_fail(
    app_factory: Callable[..., FastAPI], spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("tests")
    async with traced_service(app_factory) as jobq:
        with tracer.start_as_current_span("signup") as producer:
            created = await jobq.enqueue("failing", "boom", max_attempts=1)
        context = producer.get_span_context()

        async def boom(job: Job) -> None:
            raise RuntimeError("no luck")

        assert (await worked(jobq, "failing", "boom", boom, created.id)).state == "failed"

    (handler,) = named(spans, "process failing")
    assert handler.parent is not None and handler.parent.span_id == context.span_id
    assert handler.status.status_code is trace.StatusCode.ERROR
    assert any(event.name == "exception" for event in handler.events)
    (fail,) = named(spans, "jobq.fail")
    assert linked_to(fail) == {(context.trace_id, context.span_id)}


async def test_without_a_span_the_sdk_sends_no_trace_context(
    app_factory: Callable[..., FastAPI], spans: InMemorySpanExporter
) -> None:
    async with traced_service(app_factory) as jobq:
        created = await jobq.enqueue("untraced", "t")
        assert created.job is not None and created.job.trace is None
    (enqueue,) = named(spans, "jobq.enqueue")
    assert enqueue.links == ()


def _printed(output: str, kind: str) -> list[dict[str, Any]]:
    """The traced worker's JSON lines of one kind (`span`, `produced`, `handled`)."""
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if kind in record:
                found.append(record[kind])
    return found


@pytest.mark.timeout(NPM_TIMEOUT_SECONDS + WORKER_TIMEOUT_SECONDS)
@pytest.mark.usefixtures("node_modules")
async def test_a_python_producer_a_typescript_worker_and_jobq_share_one_trace(
    app_factory: Callable[..., FastAPI], spans: InMemorySpanExporter
) -> None:
    """The Node worker (src/traced-worker.ts) enqueues a job of its own in a span first:
    the TypeScript producer's context reaches jobq too."""
    tracer = trace.get_tracer("tests")
    await asyncio.to_thread(_run, "npm", "run", "--silent", "build", timeout=NPM_TIMEOUT_SECONDS)
    async with traced_service(app_factory) as jobq:
        with tracer.start_as_current_span("checkout") as producer:
            created = await jobq.enqueue("node-traced", "greet", {"from": "python"})
        env = clean_env(JOBQ_URL=str(jobq.base_url), JOBQ_QUEUES="node-traced", JOBQ_MAX_JOBS="2")
        output = await asyncio.to_thread(
            _run, "node", "dist/traced-worker.js", timeout=WORKER_TIMEOUT_SECONDS, env=env
        )
        (produced,) = _printed(output, "produced")
        for job_id in (created.id, produced["jobId"]):
            assert (await jobq.get_job(job_id)).state == "succeeded", output
        own = await jobq.get_job(produced["jobId"])

    python = producer.get_span_context()
    handlers = {s["attributes"]["messaging.message.id"]: s for s in _printed(output, "span")
                if s["name"] == "process node-traced"}  # fmt: skip
    handled = {h["jobId"]: h["spanId"] for h in _printed(output, "handled")}
    # the Python producer's job: its handler's span is the producer span's child
    of_python = handlers[str(created.id)]
    assert of_python["kind"] == CONSUMER
    assert of_python["traceId"] == f"{python.trace_id:032x}", output
    assert of_python["parentSpanId"] == f"{python.span_id:016x}", output
    assert handled[created.id] == of_python["spanId"]  # the active span in the handler
    assert_jobq_links(spans, python.trace_id, python.span_id)
    # the TypeScript producer's job: its context was sent with the enqueue
    assert own.trace is not None
    assert own.trace.traceparent.startswith(f"00-{produced['traceId']}-{produced['spanId']}-")
    of_node = handlers[str(produced["jobId"])]
    assert (of_node["traceId"], of_node["parentSpanId"]) == (
        produced["traceId"],
        produced["spanId"],
    )
    assert_jobq_links(spans, int(produced["traceId"], 16), int(produced["spanId"], 16))


async def test_with_opentelemetry_off_jobq_makes_no_span_but_keeps_the_context(
    app_factory: Callable[..., FastAPI], spans: InMemorySpanExporter
) -> None:
    tracer = trace.get_tracer("tests")
    async with served(app_factory()) as url, AsyncClient(url) as jobq:
        with tracer.start_as_current_span("checkout"):
            created = await jobq.enqueue("quiet", "t")
        assert created.job is not None and created.job.trace is not None

        async def ok(job: Job) -> None:
            return None

        assert (await worked(jobq, "quiet", "t", ok, created.id)).state == "succeeded"
    names = {span.name for span in spans.get_finished_spans()}
    assert names == {"checkout", "process quiet"}  # the producer's and the worker's only


WITHOUT_OPENTELEMETRY = """
import { createJobq, Worker } from "jobq-client";

const jobq = createJobq();
const { id } = await jobq.enqueue("bare", "hello", { from: "node" });
const worker = new Worker({ queues: ["bare"], waitSeconds: 1, log: () => undefined });
worker.handle("hello", async () => {
  worker.stop();
  return { done: true };
});
await worker.run();
console.log(JSON.stringify(await jobq.wait(id, 10)));
"""


@pytest.mark.timeout(NPM_TIMEOUT_SECONDS + WORKER_TIMEOUT_SECONDS)
@pytest.mark.usefixtures("node_modules")
async def test_the_typescript_package_works_without_opentelemetry(
    app_factory: Callable[..., FastAPI], tmp_path: Path
) -> None:
    """The package's build in a project whose node_modules has its dependencies but not
    @opentelemetry/api (an optional peer): it enqueues and works jobs, sending no trace
    context."""
    await asyncio.to_thread(_run, "npm", "run", "--silent", "build", timeout=NPM_TIMEOUT_SECONDS)
    modules = tmp_path / "node_modules"
    package = modules / "jobq-client"
    shutil.copytree(CLIENT / "dist", package / "dist", ignore=shutil.ignore_patterns("test"))
    shutil.copy2(CLIENT / "package.json", package / "package.json")
    for entry in (CLIENT / "node_modules").iterdir():
        if entry.name not in ("@opentelemetry", ".bin", "jobq-client"):
            (modules / entry.name).symlink_to(entry)
    (tmp_path / "package.json").write_text(json.dumps({"name": "p", "type": "module"}))
    (tmp_path / "main.mjs").write_text(WITHOUT_OPENTELEMETRY)
    async with served(app_factory()) as url:
        result = await asyncio.to_thread(
            subprocess.run,
            ["node", "main.mjs"],
            cwd=tmp_path,
            env=clean_env(JOBQ_URL=url),
            capture_output=True,
            text=True,
            timeout=WORKER_TIMEOUT_SECONDS,
            check=False,
        )
    assert result.returncode == 0, result.stdout + result.stderr
    job = json.loads(result.stdout.strip().splitlines()[-1])
    assert (job["state"], job["result"], job["trace"]) == ("succeeded", {"done": True}, None)
