// The producer's calls against a live jobq service (JOBQ_URL): enqueue and enqueueMany
// with keys of their own, getJob, wait, and retries that cannot make a second job. Run
// by tests/processes/test_sdk_typescript.py. A pushed queue: the service (which lets it
// reach loopback, JOBQ_PUSH_ALLOWED_TARGETS) POSTs a job, signed in Python, to an endpoint
// here that verifies it with verifyDelivery.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import {
  ConnectionFailed,
  createJobq,
  type Delivery,
  InvalidDelivery,
  JobqError,
  Retry,
  verifyDelivery,
} from "../index.js";

const jobq = createJobq();
const target = process.env.JOBQ_URL ?? "http://127.0.0.1:8000";
const run = Math.random().toString(36).slice(2, 8); // keys and queues of this run alone
const KEY = /^[0-9a-f]{32}$/;
const TEST = { timeout: 30_000 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Reply = (request: IncomingMessage, body: string) => Promise<[number, string] | null>;

/** A proxy in front of the service: `reply` answers a request itself, or null to pass it
 * on. Every request's body is kept, in order. */
async function proxy(reply: Reply): Promise<{ url: string; bodies: string[]; close: () => void }> {
  const bodies: string[] = [];
  const server = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    bodies.push(body);
    const forwarded = await fetch(target + request.url, {
      method: request.method,
      headers: { "content-type": "application/json" },
      body: request.method === "GET" ? undefined : body,
    });
    const own = await reply(request, body);
    const [status, text] = own ?? [forwarded.status, await forwarded.text()];
    response.writeHead(status, { "content-type": "application/problem+json", "retry-after": "0" });
    response.end(text);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, bodies, close: () => server.close() };
}

const unavailable = JSON.stringify({
  type: "urn:jobq:problem:database_unavailable", title: "Database unavailable", status: 503,
  detail: "the database cannot be reached right now", code: "database_unavailable",
});

test("enqueue sends a key of its own; the same key gives the same job", TEST, async () => {
  const queue = `ts-enqueue-${run}`;
  const first = await jobq.enqueue(queue, "send", { to: "ada" });
  assert.equal(first.deduplicated, false);
  assert.match(first.job?.idempotency_key ?? "", KEY);
  assert.deepEqual(first.job?.payload, { to: "ada" });
  const options = {
    idempotency_key: `k-${run}`, priority: 5, concurrency_key: "ada", fairness_key: "acme",
  };
  const keyed = await jobq.enqueue(queue, "send", null, options);
  const again = await jobq.enqueue(queue, "send", { ignored: true }, options);
  assert.deepEqual([again.id, again.deduplicated, keyed.deduplicated], [keyed.id, true, false]);
  const stored = await jobq.getJob(keyed.id);
  assert.deepEqual([stored.priority, stored.fairness_key], [5, "acme"]);
  assert.notEqual(keyed.id, first.id);
});

test("enqueueMany keeps the order and keys each job", TEST, async () => {
  const queue = `ts-many-${run}`;
  const items = await jobq.enqueueMany(queue, [
    { type: "fetch", payload: 1 },
    { type: "merge", depends_on: [{ ref: 0 }] },
  ]);
  assert.deepEqual(items.map((item) => [item.state, item.deduplicated]), [["queued", false], ["waiting", false]]);
  const jobs = await Promise.all(items.map((item) => jobq.getJob(item.id)));
  assert.deepEqual(jobs.map((job) => job.type), ["fetch", "merge"]);
  assert.ok(jobs.every((job) => KEY.test(job.idempotency_key ?? "")));
  assert.notEqual(jobs[0]!.idempotency_key, jobs[1]!.idempotency_key);
});

test("wait answers when the job finished, or as it is when the time is up", TEST, async () => {
  const queue = `ts-wait-${run}`;
  const { id } = await jobq.enqueue(queue, "add", { a: 1, b: 2 });
  const early = await jobq.wait(id, 0.3);
  assert.equal(early.state, "queued");
  const waiting = jobq.wait(id, 20);
  const { data } = await jobq.POST("/v1/leases", { body: { queues: [queue], worker_id: "ts-test" } });
  const lease = data!.leases[0]!;
  await jobq.POST("/v1/leases/{lease_id}/complete", {
    params: { path: { lease_id: lease.lease_id } },
    body: { result: { sum: 3 } },
  });
  const done = await waiting;
  assert.deepEqual([done.id, done.state, done.result], [id, "succeeded", { sum: 3 }]);
});

test("a lost answer is retried with the same key: one job, not two", TEST, async () => {
  const queue = `ts-retry-${run}`;
  let calls = 0;
  // The first enqueue reaches jobq (and is committed), but its answer is a 503.
  const front = await proxy(async () => (++calls === 1 ? [503, unavailable] : null));
  try {
    const client = createJobq({ url: front.url, retry: { backoffSeconds: 0.01 } });
    const enqueued = await client.enqueue(queue, "once");
    assert.equal(enqueued.deduplicated, true);
    const [sent, resent] = front.bodies.map((body) => JSON.parse(body) as { idempotency_key: string });
    assert.match(sent!.idempotency_key, KEY);
    assert.equal(resent!.idempotency_key, sent!.idempotency_key);
    const { data } = await jobq.GET("/v1/jobs", { params: { query: { queue } } });
    assert.deepEqual(data!.jobs.map((job) => job.id), [enqueued.id]);
  } finally {
    front.close();
  }
});

test("502s and refused connections are retried, up to maxRetries; a 404 is not", TEST, async () => {
  const front = await proxy(async (request) =>
    request.url?.endsWith("/1") ? [502, "<html>bad gateway</html>"] : null,
  );
  try {
    const client = createJobq({ url: front.url, retry: { maxRetries: 2, backoffSeconds: 0.01 } });
    await assert.rejects(client.getJob(1), (error: JobqError) => error.problem.status === 502);
    assert.equal(front.bodies.length, 3);
    await assert.rejects(client.getJob(2 ** 40), (error: JobqError) => error.problem.code === "job_not_found");
    assert.equal(front.bodies.length, 4);
  } finally {
    front.close();
  }
  const closed = await proxy(async () => null);
  closed.close(); // nobody listens on its port now
  const nowhere = createJobq({ url: closed.url, retry: { maxRetries: 1, backoffSeconds: 0.01 } });
  await assert.rejects(nowhere.enqueue("q", "t"), (error: unknown) => {
    assert.ok(error instanceof ConnectionFailed);
    assert.ok(error.message.startsWith(`connection_failed: ${closed.url}: fetch failed: `), error.message);
    assert.match(error.message, /ECONNREFUSED/);
    return true;
  });
});

test("Retry takes its message first and `after` as an option, as in Python", () => {
  const retry = new Retry("rate limited", { after: 30 });
  assert.deepEqual([retry.message, retry.after, retry.retryAfterSeconds], ["rate limited", 30, 30]);
  assert.equal(new Retry({ after: 5 }).message, "retry in 5s");
  assert.equal(new Retry({ after: 5, message: "busy" }).message, "busy");
  const old = new Retry(60, "the order before"); // still accepted
  assert.deepEqual([old.message, old.after], ["the order before", 60]);
  assert.throws(() => new Retry("no delay", {} as { after: number }), TypeError);
});

test("events() follows the stream and resumes after the last event it saw", TEST, async () => {
  const queue = `events-${run}`;
  const stop = new AbortController();
  const seen: number[] = [];
  const following = (async () => {
    for await (const event of jobq.events({ queues: [queue], signal: stop.signal })) {
      seen.push(event.job_id ?? -1);
      if (seen.length === 2) return event.id;
    }
    return -1;
  })();
  await sleep(500); // the stream is open: it follows from now
  const first = await jobq.enqueue(queue, "t");
  const second = await jobq.enqueue(queue, "t");
  const lastId = await following;
  assert.deepEqual(seen, [first.id, second.id]);
  const third = await jobq.enqueue(queue, "t");
  for await (const event of jobq.events({ queues: [queue], lastEventId: lastId, signal: stop.signal })) {
    assert.equal(event.job_id, third.id);
    assert.equal(event.kind, "enqueued");
    break;
  }
  stop.abort();
});

test("a pushed queue's job reaches an endpoint that verifies it; its health; pulled again", TEST, async () => {
  const queue = `push-${run}`;
  const [current, old] = [0, 0].map(() => `whsec_${randomBytes(32).toString("base64")}`) as [string, string];
  const seen: Delivery[] = [];
  const endpoint = createServer(async (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    try {
      const delivery = verifyDelivery(Buffer.concat(chunks), request.headers, old); // rotating: [current, old]
      seen.push(delivery);
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ to: (delivery.payload as { to: string }).to, attempt: delivery.attempt }));
    } catch (error) {
      response.writeHead(error instanceof InvalidDelivery ? 401 : 500).end(String(error));
    }
  });
  await new Promise<void>((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/hooks/jobq`;
    const settings = await jobq.setPushTarget(queue, { url, secrets: [current, old], timeout_seconds: 5 });
    assert.equal(settings.push?.url, url);
    assert.equal(settings.push?.secret_fingerprints.length, 2);
    const { id } = await jobq.enqueue(queue, "send", { to: "ada" }, { max_attempts: 1 });
    const job = await jobq.wait(id, 20);
    assert.deepEqual([job.state, job.result], ["succeeded", { to: "ada", attempt: 1 }]);
    const [delivery] = seen;
    assert.deepEqual(
      [delivery?.job_id, delivery?.queue, delivery?.type, delivery?.message_id],
      [id, queue, "send", `job_${id}_attempt_1`],
    );
    assert.ok(delivery?.lease_expires_at instanceof Date && delivery.lease_expires_at.getTime() > Date.now() - 60_000);
    const health = await jobq.getPushHealth(queue);
    assert.deepEqual([health.queue, health.target.url, health.breaker.state], [queue, url, "closed"]);
    assert.equal((await jobq.resetPush(queue)).breaker.failures, 0);
    assert.equal((await jobq.setPushTarget(queue, null)).push ?? null, null);
    await assert.rejects(jobq.getPushHealth(queue), (error) => error instanceof JobqError && error.problem.status === 404);
  } finally {
    endpoint.close();
  }
});

test("listAudit pages the admin actions newest first, filtered", TEST, async () => {
  const queue = `audited-${run}`;
  const started = new Date(Date.now() - 60_000);
  for (const action of ["pause", "resume", "pause"] as const) {
    const { response } = await jobq.POST(`/v1/queues/{queue}/${action}`, { params: { path: { queue } } });
    assert.equal(response.status, 200);
  }
  const page = await jobq.listAudit({ queue, since: started, limit: 2 });
  assert.deepEqual(page.entries.map((e) => [e.action, e.queue, e.status]), [
    ["pauseQueue", queue, 200],
    ["resumeQueue", queue, 200],
  ]);
  assert.equal(page.next_before, page.entries[1]?.id);
  const older = await jobq.listAudit({ queue, before: page.next_before ?? undefined });
  assert.deepEqual(older.entries.map((e) => e.action), ["pauseQueue"]);
  assert.equal(older.next_before, null);
  assert.deepEqual((await jobq.listAudit({ queue, action: "purgeQueue" })).entries, []);
  await assert.rejects(jobq.listAudit({ action: "not an action" }), (error) => error instanceof JobqError && error.problem.status === 422);
});
