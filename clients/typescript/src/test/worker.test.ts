// The Worker against a live jobq service (JOBQ_URL): concurrency, progress, heartbeats
// past a lease, cancellation, Permanent and Retry, stopping, presence and quiet. Run by
// tests/processes/test_sdk_typescript.py.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { test } from "node:test";
import { createJobq, Permanent, Retry, SDK_VERSION, Snooze, Worker, type Job, type WorkerInfo } from "../index.js";

const jobq = createJobq();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const quiet = () => undefined;
// Each takes seconds; one that hangs is named and ended here, and the others still run.
const TEST = { timeout: 30_000 };

async function enqueue(queue: string, type: string, payload: unknown = null): Promise<number> {
  const { data, error } = await jobq.POST("/v1/queues/{queue}/jobs", {
    params: { path: { queue } },
    body: { type, payload }, // every defaulted field may be left out
  });
  assert.equal(error, undefined);
  return data!.id;
}

async function job(id: number): Promise<Job> {
  const { data } = await jobq.GET("/v1/jobs/{job_id}", { params: { path: { job_id: id } } });
  return data!;
}

async function until(check: () => Promise<boolean>, ms = 15000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    assert.ok(Date.now() < end, "not in time");
    await sleep(50);
  }
}

test("runs at most `concurrency` handlers at once, leasing as slots free up", TEST, async () => {
  const ids = await Promise.all(Array.from({ length: 6 }, (_, i) => enqueue("ts-c", "nap", i)));
  let now = 0;
  let most = 0;
  const worker = new Worker({ queues: ["ts-c"], concurrency: 3, waitSeconds: 1, log: quiet })
    .handle("nap", async ({ job }) => {
      most = Math.max(most, ++now);
      await sleep(200);
      now--;
      return { slept: job.payload };
    });
  const running = worker.run();
  await until(async () => (await Promise.all(ids.map(job))).every((j) => j.state === "succeeded"));
  worker.stop();
  await running;
  assert.equal(most, 3);
  assert.deepEqual((await job(ids[5]!)).result, { slept: 5 });
});

test("a full worker acks with the lease of its next jobs (complete-and-lease)", TEST, async () => {
  const limit = await jobq.PUT("/v1/queues/{queue}/settings", {
    params: { path: { queue: "ts-limited" } },
    body: { max_running: 2 },
  });
  assert.equal(limit.error, undefined);
  const ids = await Promise.all(Array.from({ length: 8 }, (_, i) => enqueue("ts-limited", "nap", i)));
  const client = createJobq();
  const acks: { lease?: { max_jobs: number } }[] = [];
  client.use({
    async onRequest({ request }) {
      if (new URL(request.url).pathname === "/v1/acks") acks.push(await request.clone().json());
      return request;
    },
  });
  const worker = new Worker({ client, queues: ["ts-limited"], concurrency: 2, waitSeconds: 1, log: quiet })
    .handle("nap", async ({ job }) => {
      await sleep(20);
      return job.payload;
    });
  const running = worker.run();
  await until(async () => (await Promise.all(ids.map(job))).every((j) => j.state === "succeeded"));
  worker.stop();
  await running;
  assert.ok(acks.some((call) => call.lease !== undefined), "no ack carried a lease");
  assert.ok(acks.every((call) => (call.lease?.max_jobs ?? 1) <= 2));
});

test("reports progress and keeps a job past its lease with heartbeats", TEST, async () => {
  const id = await enqueue("ts-p", "long");
  const worker = new Worker({ queues: ["ts-p"], leaseSeconds: 2, waitSeconds: 1, log: quiet })
    .handle("long", async ({ progress }) => {
      await progress(50, "half", "halfway");
      await sleep(3500); // longer than the 2-s lease
      return "done";
    });
  const running = worker.run();
  await until(async () => (await job(id)).state === "succeeded");
  worker.stop();
  await running;
  const done = await job(id);
  assert.equal(done.attempt, 1);
  assert.equal(done.progress?.stage, "half");
  assert.equal(done.progress?.percent, 50);
});

test("honours cancellation, Permanent and Retry", TEST, async () => {
  const cancelled = await enqueue("ts-f", "loop");
  const permanent = await enqueue("ts-f", "bad");
  const later = await enqueue("ts-f", "busy");
  const worker = new Worker({ queues: ["ts-f"], leaseSeconds: 3, waitSeconds: 1, log: quiet })
    .handle("loop", async ({ signal }) => {
      while (!signal.aborted) await sleep(50);
      throw new Error("cancelled");
    })
    .handle("bad", () => {
      throw new Permanent("no such input");
    })
    .handle("busy", () => {
      throw new Retry("provider busy", { after: 60 });
    });
  const running = worker.run();
  await until(async () => (await job(cancelled)).state === "running");
  await jobq.POST("/v1/jobs/{job_id}/cancel", { params: { path: { job_id: cancelled } } });
  await until(async () => (await job(cancelled)).state === "cancelled");
  await until(async () => (await job(permanent)).state === "failed");
  await until(async () => (await job(later)).attempt === 1 && (await job(later)).state === "queued");
  worker.stop();
  await running;
  assert.equal((await job(permanent)).last_error?.type, "Permanent");
  const retried = await job(later);
  assert.ok(Date.parse(retried.run_at) - Date.now() > 50_000, retried.run_at);
});

test("cancels a handler past its job's timeout, then abandons one that goes on", TEST, async () => {
  const enqueueTimed = async (type: string, priority: number) => {
    const { data, error } = await jobq.POST("/v1/queues/{queue}/jobs", {
      params: { path: { queue: "ts-t" } },
      body: { type, priority, timeout_seconds: 1, max_attempts: 1 },
    });
    assert.equal(error, undefined);
    return data!.id;
  };
  const polite = await enqueueTimed("polite", 3);
  const deaf = await enqueueTimed("deaf", 2);
  const quick = await enqueue("ts-t", "quick");
  const seen: Record<string, number> = {};
  const logged: string[] = [];
  const worker = new Worker({
    queues: ["ts-t"],
    concurrency: 1,
    waitSeconds: 1,
    timeoutGraceSeconds: 0.5,
    log: (message) => logged.push(message),
  })
    .handle("polite", async ({ signal, timedOut }) => {
      seen.polite = Date.now();
      while (!signal.aborted) await sleep(20);
      seen.politeStopped = Date.now();
      throw new Error(`stopped (timed out before: ${timedOut})`);
    })
    .handle("deaf", async () => {
      seen.deaf = Date.now();
      await sleep(4000); // ignores the signal: abandoned
      return "too late";
    })
    .handle("quick", () => {
      seen.quick = Date.now();
      return "ok";
    });
  const running = worker.run();
  await until(async () => (await job(quick)).state === "succeeded");
  const stoppedAfter = seen.politeStopped! - seen.polite!;
  assert.ok(stoppedAfter >= 900 && stoppedAfter < 2500, `${stoppedAfter} ms`);
  const abandonedAfter = seen.quick! - seen.deaf!;
  assert.ok(abandonedAfter >= 1400 && abandonedAfter < 3500, `${abandonedAfter} ms`);
  // The service's reaper failed both attempts as `timeout`; the worker sent no ack.
  for (const id of [polite, deaf]) {
    await until(async () => (await job(id)).state === "failed", 20_000);
    const failed = await job(id);
    assert.equal(failed.last_error?.type, "timeout");
    assert.deepEqual(failed.attempts.map((a) => a.outcome), ["timeout"]);
  }
  worker.stop();
  await running;
  assert.ok(logged.some((m) => /timed out after 1 s: stopped/.test(m)), logged.join("\n"));
  assert.ok(logged.some((m) => /timed out after 1 s: abandoned/.test(m)), logged.join("\n"));
});

test("Snooze runs the job again later without spending an attempt", TEST, async () => {
  const { data } = await jobq.POST("/v1/queues/{queue}/jobs", {
    params: { path: { queue: "ts-s" } },
    body: { type: "poll", max_attempts: 1 },
  });
  const id = data!.id;
  const runs: number[] = [];
  const worker = new Worker({ queues: ["ts-s"], concurrency: 1, waitSeconds: 1, log: quiet }).handle(
    "poll",
    ({ job }) => {
      runs.push(job.attempt);
      if (runs.length <= 3) throw new Snooze(0.2);
      return "ready";
    },
  );
  const running = worker.run();
  await until(async () => (await job(id)).state === "succeeded");
  worker.stop();
  await running;
  const done = await job(id);
  assert.deepEqual(runs, [1, 1, 1, 1]);
  assert.equal(done.attempt, 1);
  assert.equal(done.snoozes, 3);
  assert.deepEqual(done.attempts.map((a) => a.outcome), ["snoozed", "snoozed", "snoozed", "succeeded"]);
});

test("an idle worker is listed with its SDK, version, queues, types and host", TEST, async () => {
  const worker = new Worker({ queues: ["ts-idle"], workerId: "ts-idle-1", waitSeconds: 0.2,
    presenceSeconds: 0.3, log: quiet }).handle("resize", () => null);
  const running = worker.run();
  let shown: WorkerInfo | undefined;
  await until(async () => {
    shown = (await jobq.listWorkers()).find((w) => w.worker_id === "ts-idle-1");
    return shown !== undefined;
  });
  worker.stop();
  await running;
  const version = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
  assert.equal(SDK_VERSION, version);
  assert.deepEqual([shown!.sdk, shown!.version, shown!.host], ["jobq-client-typescript", version, hostname()]);
  assert.deepEqual([shown!.queues, shown!.types, shown!.status, shown!.running], [["ts-idle"], ["resize"], "live", 0]);
});

test("a quieted worker finishes its job, leases no more, and resumes when asked", TEST, async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const started: number[] = [];
  const worker = new Worker({ queues: ["ts-q"], workerId: "ts-quiet-1", concurrency: 1, waitSeconds: 0.2,
    presenceSeconds: 0.3, leaseSeconds: 3, log: quiet }).handle("work", async ({ job }) => {
    started.push(job.id);
    if (started.length === 1) await held; // outlives its lease: heartbeats keep it
    return "done";
  });
  const first = await enqueue("ts-q", "work");
  const running = worker.run();
  await until(async () => started.length === 1);
  // an admin quiets a worker it sees listed (within a flush of its first call)
  await until(async () => (await jobq.listWorkers()).some((w) => w.worker_id === "ts-quiet-1"));
  await jobq.quietWorker("ts-quiet-1");
  const second = await enqueue("ts-q", "work");
  await sleep(4000);
  release();
  await until(async () => (await job(first)).state === "succeeded");
  await sleep(1500); // several lease calls' worth
  assert.deepEqual(started, [first]);
  assert.equal((await job(second)).state, "queued");
  const shown = (await jobq.listWorkers()).find((w) => w.worker_id === "ts-quiet-1");
  assert.equal(shown?.quiet, true);
  await jobq.resumeWorker("ts-quiet-1");
  await until(async () => (await job(second)).state === "succeeded");
  worker.stop();
  await running;
  assert.deepEqual(started, [first, second]);
  assert.equal((await job(first)).attempt, 1);
});
