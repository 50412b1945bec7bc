// A worker with OpenTelemetry's SDK whose spans go to stdout, one JSON line each (the
// tracing test's, tests/processes/test_tracing.py; not shipped). It enqueues a job of
// its own inside a span first (a TypeScript producer), then works JOBQ_MAX_JOBS jobs of
// JOBQ_QUEUES and stops.
//
//   JOBQ_URL=http://127.0.0.1:8000 JOBQ_QUEUES=traced JOBQ_MAX_JOBS=2 node dist/traced-worker.js

import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, SimpleSpanProcessor, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { createJobq, Worker } from "./index.js";

const exporter: SpanExporter = {
  export(spans, done) {
    for (const span of spans) {
      const own = span.spanContext();
      const parent = span.parentSpanContext;
      const line = {
        name: span.name,
        kind: span.kind,
        traceId: own.traceId,
        spanId: own.spanId,
        parentSpanId: parent?.spanId ?? null,
        attributes: span.attributes,
        status: span.status.code,
      };
      console.log(JSON.stringify({ span: line }));
    }
    done({ code: 0 }); // SUCCESS
  },
  shutdown: async () => undefined,
};
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
trace.setGlobalTracerProvider(provider);
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const env = process.env;
const queues = (env.JOBQ_QUEUES ?? "traced").split(",").filter(Boolean);
const maxJobs = Number(env.JOBQ_MAX_JOBS ?? "1");

const producer = trace.getTracer("traced-worker");
await producer.startActiveSpan("ts-producer", async (span) => {
  const enqueued = await createJobq().enqueue(queues[0]!, "greet", { from: "typescript" });
  const { traceId, spanId } = span.spanContext();
  console.log(JSON.stringify({ produced: { jobId: enqueued.id, traceId, spanId } }));
  span.end();
});

let finished = 0;
const worker = new Worker({
  queues,
  waitSeconds: 1,
  log: (message) => {
    console.log(JSON.stringify({ log: message }));
    if (/ (succeeded|failed)/.test(message) && ++finished === maxJobs) worker.stop();
  },
});
worker.handle("greet", async ({ job }) => {
  // the handler's span is the active one while it runs
  const active = trace.getActiveSpan()?.spanContext();
  console.log(JSON.stringify({ handled: { jobId: job.id, spanId: active?.spanId ?? null } }));
  return { greeted: true };
});
await worker.run();
await provider.shutdown();
