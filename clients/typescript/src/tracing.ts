// OpenTelemetry, when `@opentelemetry/api` is installed (an optional peer dependency,
// imported on first use): an enqueue sends the active span's W3C trace context
// (`traceparent`, `tracestate` headers), and the Worker runs each handler in a span
// that is a child of the context its job was enqueued in. Without the package, nothing
// happens. The carrier is W3C Trace Context whatever propagator the application set:
// that is what jobq stores.

import type * as Otel from "@opentelemetry/api";

type Api = typeof Otel;

/** A job's trace context, as jobq stores it (`job.trace`). */
export interface TraceContext {
  traceparent: string;
  tracestate?: string | null;
}

let loaded: Promise<Api | null> | undefined;

/** The OpenTelemetry API, or null when it is not installed. */
export function otel(): Promise<Api | null> {
  loaded ??= import("@opentelemetry/api").then(
    (api) => api,
    () => null,
  );
  return loaded;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The active span's `traceparent` (and `tracestate`) headers; none without one. */
export async function traceHeaders(): Promise<Record<string, string>> {
  const api = await otel();
  const span = api?.trace.getSpanContext(api.context.active());
  if (!api || !span || !api.isSpanContextValid(span)) return {};
  const flags = (span.traceFlags & api.TraceFlags.SAMPLED).toString(16).padStart(2, "0");
  const headers: Record<string, string> = { traceparent: `00-${span.traceId}-${span.spanId}-${flags}` };
  const state = span.traceState?.serialize();
  if (state) headers.tracestate = state;
  return headers;
}

/** The context a stored trace context names (the job's producer's span), or the active
 * one when the job has none. */
function parentOf(api: Api, trace: TraceContext | null | undefined): Otel.Context {
  const found = trace ? TRACEPARENT.exec(trace.traceparent) : null;
  if (!found) return api.context.active();
  const spanContext: Otel.SpanContext = {
    traceId: found[2]!,
    spanId: found[3]!,
    traceFlags: parseInt(found[4]!, 16) & api.TraceFlags.SAMPLED,
    isRemote: true,
    traceState: trace?.tracestate ? api.createTraceState(trace.tracestate) : undefined,
  };
  return api.trace.setSpanContext(api.ROOT_CONTEXT, spanContext);
}

/** What the handler span needs of a job. */
export interface TracedJob {
  id: number;
  queue: string;
  type: string;
  attempt: number;
  trace?: TraceContext | null;
}

/** Run `handler` in its span (a child of the job's trace context), current while it
 * runs; an error it throws is recorded. Without OpenTelemetry, `handler` alone. */
export async function handling<T>(job: TracedJob, handler: () => T | Promise<T>): Promise<T> {
  const api = await otel();
  if (!api) return handler();
  const tracer = api.trace.getTracer("jobq-client");
  const span = tracer.startSpan(
    `process ${job.queue}`,
    {
      kind: api.SpanKind.CONSUMER,
      attributes: {
        "messaging.system": "jobq",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": String(job.id),
        "jobq.job.type": job.type,
        "jobq.job.attempt": job.attempt,
      },
    },
    parentOf(api, job.trace),
  );
  try {
    return await api.context.with(api.trace.setSpan(api.context.active(), span), handler);
  } catch (error) {
    span.recordException(error instanceof Error ? error : String(error));
    span.setStatus({ code: api.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : undefined });
    throw error;
  } finally {
    span.end();
  }
}
