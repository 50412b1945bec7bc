// jobq for Node and TypeScript: a client typed from openapi/openapi.json (openapi-fetch
// sends every request; `npm run generate` rebuilds src/schema.d.ts) with the producer's
// calls of the Python client (enqueue, enqueueMany, getJob, wait: retried when safe),
// and a Worker that leases as slots free up, heartbeats, reports progress, honours
// cancellation and stops gracefully; for pushed queues, their target and health, and
// `verifyDelivery` for the endpoint that receives their jobs (src/push.ts); and the
// audit log of admin actions (`listAudit`).

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import createClient, { type Client } from "openapi-fetch";
import { type EventsOptions, followEvents, type JobqEvent } from "./events.js";
import type { components, paths } from "./schema.js";
import { handling, traceHeaders } from "./tracing.js";

export type { EventKind, EventsOptions, JobqEvent } from "./events.js";
export type { components, paths } from "./schema.js";
export {
  DELIVERY_TOLERANCE_SECONDS,
  type Delivery,
  type DeliveryHeaders,
  InvalidDelivery,
  type VerifyOptions,
  verifyDelivery,
} from "./push.js";
type Schemas = components["schemas"];
export type Job = Schemas["JobOut"];
export type JobIn = Schemas["JobIn"];
export type JobState = Job["state"];
export type BatchItem = Schemas["BatchItemOut"];
export type Lease = Schemas["LeaseOut"];
export type Parent = Schemas["ParentOut"];
export type Problem = Schemas["Problem"];
/** Uniqueness for an enqueue (`options.unique`): one job of its type in the queue per
 * `key`, per `period` seconds and while in `states`; `on_conflict: "replace"` gives a
 * queued job holding it this enqueue's payload and run time (debounce). */
export type Unique = Schemas["UniqueIn"];
/** Why a job is not running now (`explainJob`): every reason that holds. */
export type Explanation = Schemas["ExplainOut"];
/** Where a pushed queue's jobs are POSTed (`setPushTarget`): `secrets` are write-only,
 * left out the current ones stay. */
export type PushTarget = Schemas["PushTargetIn"];
/** A pushed queue's target (secrets by fingerprint) and its circuit breaker. */
export type PushHealth = Schemas["PushHealthOut"];
export type QueueSettings = Schemas["QueueSettingsOut"];
/** One admin action, or a refused attempt at one (`status` 401 or 403): the key's name
 * (null: none, or the token named no key), the operation id, what it named, its status. */
export type AuditEntry = Schemas["AuditEntryOut"];
/** Audit entries newest first; `next_before` as `before` gives the next, older page. */
export type AuditPage = Schemas["AuditPage"];
/** Filters of `listAudit` (each optional): a key's name, an operation id
 * (`purgeQueue`), a queue, entries `since` a time, `before` an entry id, and `limit`
 * (default 100, at most 500). */
export interface AuditQuery {
  key?: string;
  action?: string;
  queue?: string;
  since?: Date | string;
  before?: number;
  limit?: number;
}
/** A worker seen lately, idle or busy, `live` or `gone` (`listWorkers`). */
export type WorkerInfo = Schemas["WorkerOut"];
/** Every field of an enqueue but `type` and `payload`, as the API names them. */
export type EnqueueOptions = Omit<JobIn, "type" | "payload">;

/** An enqueued job; `deduplicated` when a job already had its idempotency key or its
 * uniqueness, `replaced` when this enqueue replaced that job's payload and run time. `job`
 * is the whole job, except when the API key lacks the `read` scope and the job existed:
 * jobq then answers only its `id` and `state`, and `job` is null. */
export interface Enqueued {
  id: number;
  state: JobState;
  deduplicated: boolean;
  replaced: boolean;
  job: Job | null;
}

/** How often and how patiently a call is retried after a connection error, a timeout or
 * a 502/503/504. The n-th retry waits a random time between half and all of
 * `min(maxBackoffSeconds, backoffSeconds * 2**n)`, or what the answer's `Retry-After`
 * asks if that is longer (up to `maxBackoffSeconds`). `{ maxRetries: 0 }` never retries. */
export interface RetryPolicy {
  maxRetries?: number;
  backoffSeconds?: number;
  maxBackoffSeconds?: number;
}

export interface JobqOptions {
  /** Default `JOBQ_URL`, else http://127.0.0.1:8000. */
  url?: string;
  /** Sent as a Bearer token; default `JOBQ_API_KEY`. */
  apiKey?: string;
  /** How long one call may take (default 10 s; a long poll gets its wait on top). */
  timeoutSeconds?: number;
  retry?: RetryPolicy;
}

/** The typed client (`GET`, `POST`, … of openapi-fetch) with the producer's calls. */
export interface JobqClient extends Client<paths> {
  /** Enqueue one job; a job that already had this idempotency key or uniqueness
   * (`options.unique`) comes back as is, or replaced (`unique.on_conflict`). A
   * key is always sent (a random one when none is given), so a retried enqueue whose
   * first try was committed returns that job instead of making a second one. */
  enqueue(queue: string, type: string, payload?: unknown, options?: EnqueueOptions): Promise<Enqueued>;
  /** Enqueue up to 1000 jobs in one call, each with a key as `enqueue`; the answer is in
   * request order. */
  enqueueMany(queue: string, jobs: JobIn[]): Promise<BatchItem[]>;
  /** A job with its progress, result, errors and attempts. */
  getJob(jobId: number): Promise<Job>;
  /** Why a job is not running now: every reason that holds (`leasable`: none blocks, the
   * next lease of its queue takes it), or how it ended. */
  explainJob(jobId: number): Promise<Explanation>;
  /** The job once it finished (succeeded, failed or cancelled), or as it is when
   * `timeoutSeconds` (default 60) passed: look at its `state`. Long polls, no busy loop. */
  wait(jobId: number, timeoutSeconds?: number): Promise<Job>;
  /** Job and queue events as they happen (`GET /v1/events`), from now or after
   * `lastEventId`; reconnects and resumes by itself. Break out of the loop to stop. */
  events(options?: EventsOptions): AsyncGenerator<JobqEvent>;
  /** Push the queue's jobs to `target` (admin scope), or, with null, let workers lease
   * them again; its other settings stay. The queue's settings after the change. */
  setPushTarget(queue: string, target: PushTarget | null): Promise<QueueSettings>;
  /** A pushed queue's target and its circuit breaker (a `JobqError` 404: it is pulled). */
  getPushHealth(queue: string): Promise<PushHealth>;
  /** Close a pushed queue's circuit breaker (admin scope): its deliveries resume at once. */
  resetPush(queue: string): Promise<PushHealth>;
  /** One page of the audit log, newest first (admin scope): who did which admin action
   * when, and how it ended. */
  listAudit(query?: AuditQuery): Promise<AuditPage>;
  /** Every worker seen lately, idle or busy, live or gone (page after page). */
  listWorkers(): Promise<WorkerInfo[]>;
  /** Ask a worker to lease no more (admin scope); it finishes the jobs it holds. */
  quietWorker(workerId: string): Promise<void>;
  /** Let a quiet worker lease again (admin scope). */
  resumeWorker(workerId: string): Promise<void>;
}

export const DEFAULT_URL = "http://127.0.0.1:8000";
const DEFAULT_TIMEOUT_SECONDS = 10;
const DEFAULT_WAIT_SECONDS = 60;
const MAX_WAIT_SECONDS = 30; // the service's bound on one wait
const LONG_POLL_MARGIN_SECONDS = 10; // a long poll may take this much longer to answer
const RETRIED_STATUSES = new Set([502, 503, 504]);
const FINISHED: ReadonlySet<JobState> = new Set(["succeeded", "failed", "cancelled"]);
export const SDK_NAME = "jobq-client-typescript";
export const SDK_VERSION = "0.1.0"; // package.json's (a test holds them equal)
const QUIET_HEADER = "jobq-worker-quiet"; // "1": the worker is quiet, it was leased nothing
const WORKERS_PAGE = 500;

/** The service refused a call: its problem (status, stable `code`, detail). */
export class JobqError extends Error {
  override name = "JobqError";
  constructor(readonly problem: Problem) {
    super(`${problem.status} ${problem.code}: ${problem.detail ?? problem.title}`);
  }
}

/** The service could not be reached (or did not answer in time), retries included. */
export class ConnectionFailed extends JobqError {
  override name = "ConnectionFailed";
  constructor(url: string, cause: unknown) {
    // fetch's own error says "fetch failed"; the reason (ECONNREFUSED, …) is its cause
    const reasons = [cause, (cause as { cause?: unknown } | undefined)?.cause]
      .filter((reason): reason is Error => reason instanceof Error)
      .map((reason) => reason.message);
    const detail = `${url}: ${reasons.join(": ") || String(cause)}`;
    super({ type: "urn:jobq:problem:connection_failed", title: "Connection failed", status: 0, detail, code: "connection_failed" });
    this.message = `connection_failed: ${detail}`;
    this.cause = cause;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A random key, so that retrying an enqueue cannot create a second job. */
export function newIdempotencyKey(): string {
  return randomUUID().replaceAll("-", "");
}

/** Seconds to wait before retry `retry` (0 for the first), as `RetryPolicy` says. */
export function retryDelay(policy: RetryPolicy, retry: number, retryAfter?: number): number {
  const max = policy.maxBackoffSeconds ?? 5;
  const ceiling = Math.min(max, (policy.backoffSeconds ?? 0.2) * 2 ** retry);
  let wait = ceiling / 2 + Math.random() * (ceiling / 2);
  if (retryAfter !== undefined) wait = Math.max(wait, Math.min(retryAfter, max));
  return wait;
}

function retryAfter(response: Response | undefined): number | undefined {
  const value = Number(response?.headers.get("retry-after") ?? NaN);
  return Number.isFinite(value) ? Math.max(0, value) : undefined;
}

/** What an error answer says, as a problem even when it is not problem+json (a proxy's). */
function asProblem(error: unknown, response: Response): Problem {
  if (typeof error === "object" && error !== null && "code" in error) return error as Problem;
  const title = response.statusText || `HTTP ${response.status}`;
  const detail = typeof error === "string" && error ? error.slice(0, 500) : title;
  return { type: "about:blank", title, status: response.status, detail, code: "http_error" };
}

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** A client of the jobq service at `url` (default `JOBQ_URL`, else 127.0.0.1:8000). */
export function createJobq(options: JobqOptions = {}): JobqClient {
  const url = options.url ?? process.env.JOBQ_URL ?? DEFAULT_URL;
  const apiKey = options.apiKey ?? process.env.JOBQ_API_KEY;
  const timeout = options.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
  const policy = options.retry ?? {};
  const client = createClient<paths>({
    baseUrl: url,
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
  });

  // Send until an answer that is not a 502/503/504, retrying those and connection
  // errors with backoff: safe, since every call here may be repeated.
  async function call<T>(send: (signal: AbortSignal) => Promise<Answer<T>>, longPoll = 0): Promise<T> {
    for (let retry = 0; ; retry++) {
      let failure: JobqError;
      let answer: Answer<T> | undefined;
      try {
        answer = await send(AbortSignal.timeout((timeout + longPoll) * 1000));
        if (answer.error === undefined) return answer.data as T;
        failure = new JobqError(asProblem(answer.error, answer.response));
        if (!RETRIED_STATUSES.has(answer.response.status)) throw failure;
      } catch (error) {
        if (error instanceof JobqError) throw error;
        failure = new ConnectionFailed(url, error);
      }
      if (retry >= (policy.maxRetries ?? 4)) throw failure;
      await sleep(retryDelay(policy, retry, retryAfter(answer?.response)) * 1000);
    }
  }

  const withKey = <J extends { idempotency_key?: string | null }>(job: J): J => ({
    ...job,
    idempotency_key: job.idempotency_key ?? newIdempotencyKey(),
  });

  const getJob = (jobId: number, waitSeconds = 0): Promise<Job> =>
    call(
      (signal) =>
        client.GET("/v1/jobs/{job_id}", {
          params: { path: { job_id: jobId }, query: waitSeconds ? { wait_seconds: waitSeconds } : {} },
          signal,
        }),
      waitSeconds ? waitSeconds + LONG_POLL_MARGIN_SECONDS : 0,
    );

  const producer = {
    async enqueue(queue: string, type: string, payload: unknown = null, options: EnqueueOptions = {}) {
      const body = withKey({ ...options, type, payload });
      const header = await traceHeaders(); // the job's `trace`, unless `options` has one
      const answer = await call((signal) =>
        client.POST("/v1/queues/{queue}/jobs", { params: { path: { queue }, header }, body, signal }),
      );
      const job = "payload" in answer ? (answer as Job) : null;
      const { id, state, deduplicated } = answer;
      return { id, state, deduplicated, replaced: answer.replaced ?? false, job };
    },
    async enqueueMany(queue: string, jobs: JobIn[]) {
      const body = { jobs: jobs.map(withKey) };
      const header = await traceHeaders();
      const answer = await call((signal) =>
        client.POST("/v1/queues/{queue}/jobs/batch", { params: { path: { queue }, header }, body, signal }),
      );
      return answer.jobs;
    },
    getJob: (jobId: number) => getJob(jobId),
    explainJob: (jobId: number) =>
      call((signal) => client.GET("/v1/jobs/{job_id}/explain", { params: { path: { job_id: jobId } }, signal })),
    async wait(jobId: number, timeoutSeconds = DEFAULT_WAIT_SECONDS) {
      const deadline = Date.now() + timeoutSeconds * 1000;
      for (;;) {
        const left = (deadline - Date.now()) / 1000;
        const seconds = Math.round(Math.min(Math.max(left, 0), MAX_WAIT_SECONDS) * 1000) / 1000;
        const job = await getJob(jobId, seconds);
        if (FINISHED.has(job.state) || left <= 0) return job;
      }
    },
    events: (options: EventsOptions = {}) =>
      followEvents(
        url,
        apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
        options,
        (problem) => new JobqError(problem),
      ),
    setPushTarget: (queue: string, target: PushTarget | null) =>
      call((signal) =>
        client.PUT("/v1/queues/{queue}/settings", { params: { path: { queue } }, body: { push: target }, signal }),
      ),
    getPushHealth: (queue: string) =>
      call((signal) => client.GET("/v1/queues/{queue}/push", { params: { path: { queue } }, signal })),
    resetPush: (queue: string) =>
      call((signal) => client.POST("/v1/queues/{queue}/push/reset", { params: { path: { queue } }, signal })),
    listAudit: ({ since, ...rest }: AuditQuery = {}) => {
      const query = { ...rest, ...(since === undefined ? {} : { since: new Date(since).toISOString() }) };
      return call((signal) => client.GET("/v1/audit", { params: { query }, signal }));
    },
    async listWorkers() {
      const found: WorkerInfo[] = [];
      let after: string | undefined;
      for (;;) {
        const query = after === undefined ? { limit: WORKERS_PAGE } : { limit: WORKERS_PAGE, after };
        const page = await call((signal) => client.GET("/v1/workers", { params: { query }, signal }));
        found.push(...page.workers);
        if (page.next_after == null) return found;
        after = page.next_after;
      }
    },
    async quietWorker(workerId: string) {
      const path = { worker_id: workerId };
      await call((signal) => client.POST("/v1/workers/{worker_id}/quiet", { params: { path }, signal }));
    },
    async resumeWorker(workerId: string) {
      const path = { worker_id: workerId };
      await call((signal) => client.POST("/v1/workers/{worker_id}/resume", { params: { path }, signal }));
    },
  } satisfies Omit<JobqClient, keyof Client<paths>>;
  return Object.assign(client, producer);
}

/** Throw from a handler when retrying cannot help: the job fails for good. */
export class Permanent extends Error {
  override name = "Permanent";
}

/**
 * Throw from a handler to fail this attempt and run the job again `after` seconds from
 * now (instead of the queue's backoff), while it has attempts left. As in Python
 * (`Retry("rate limited", after=30)`), the message comes first:
 *
 *     throw new Retry("rate limited by the provider", { after: 30 });
 *     throw new Retry({ after: 30 }); // "retry in 30s"
 */
export class Retry extends Error {
  override name = "Retry";
  /** Seconds until the next attempt. */
  readonly after: number;
  constructor(message: string, options: { after: number });
  constructor(options: { after: number; message?: string });
  /** @deprecated Write `new Retry(message, { after })`, the order of Python's `Retry`. */
  constructor(after: number, message?: string);
  constructor(first: string | number | { after: number; message?: string }, second?: string | { after: number }) {
    const [after, message] =
      typeof first === "number"
        ? [first, typeof second === "string" ? second : undefined]
        : typeof first === "string"
          ? [typeof second === "object" ? second.after : NaN, first || undefined]
          : [first.after, first.message];
    if (!Number.isFinite(after) || after < 0) throw new TypeError(`Retry needs { after: seconds >= 0 }, got ${after}`);
    super(message ?? `retry in ${after}s`);
    this.after = after;
  }

  /** `after`, as Python's `Retry` names it. */
  get retryAfterSeconds(): number {
    return this.after;
  }
}

const TIMED_OUT = Symbol("timed out");

/**
 * Throw from a handler to run the job again `seconds` from now without spending an
 * attempt, as Python's `Snooze`. The service allows a job `JOBQ_MAX_SNOOZES` snoozes (25);
 * past that the worker fails the attempt instead.
 *
 *     throw new Snooze(60); // the report is not ready yet
 */
export class Snooze extends Error {
  override name = "Snooze";
  constructor(readonly seconds: number) {
    if (!Number.isFinite(seconds) || seconds < 0) throw new TypeError(`Snooze needs seconds >= 0, got ${seconds}`);
    super(`snooze for ${seconds}s`);
  }
}

/** What a handler gets: the job, its parents' results, progress, cancellation. */
export interface JobContext {
  readonly job: Job;
  readonly parents: Parent[];
  /** True once an operator asked to cancel the job (seen on a heartbeat). */
  readonly cancelRequested: boolean;
  /**
   * True once this attempt ran past the job's `timeout_seconds`: the service failed it as
   * `timeout`. Stop: the worker stops waiting for the handler `timeoutGraceSeconds` later.
   */
  readonly timedOut: boolean;
  /** Aborted when cancellation is requested, the lease is lost or the attempt times out. */
  readonly signal: AbortSignal;
  /** Report progress now (it also extends the lease). */
  progress(percent?: number, stage?: string, message?: string): Promise<void>;
}

export type Handler = (context: JobContext) => unknown;

export interface WorkerOptions {
  /** Default: `createJobq()` (any openapi-fetch client of jobq's paths will do). */
  client?: Client<paths>;
  queues: string[];
  /** Jobs run at once (default 4). */
  concurrency?: number;
  workerId?: string;
  /** Long-poll this long for jobs when none is due (default 20, at most 30). */
  waitSeconds?: number;
  /** Lease length asked for (default: each job's own). */
  leaseSeconds?: number;
  /** On stop, wait this long for running handlers (default 30 s). */
  graceSeconds?: number;
  /** A handler still running this long after its job's timeout is abandoned (default 5 s). */
  timeoutGraceSeconds?: number;
  /** With no call for this long, say it is alive; quiet, ask this often whether it is
   * resumed (default 15 s). */
  presenceSeconds?: number;
  log?: (message: string) => void;
}

type Ack = Schemas["AckComplete"] | Schemas["AckFail"];

/**
 * Leases jobs of its handlers' types as slots free up (never more than `concurrency`
 * at once), heartbeats every third of a lease, completes a job with its handler's
 * return value or fails it with the thrown error (`Permanent`: for good; `Retry`: after
 * a delay). A job that finishes while the worker is full is acknowledged with the
 * lease of the next jobs in one call (complete-and-lease: on a queue with
 * `max_running`, its slot is taken again without waiting for anyone); one that
 * finishes while the worker waits for jobs is acknowledged on its own. `stop()` (or
 * SIGTERM with `runUntilSignal`) leases no more and lets running handlers finish.
 * A job with a `timeout_seconds` gets that long: then its `signal` is aborted and
 * `timedOut` is true (the service fails the attempt as `timeout`), and
 * `timeoutGraceSeconds` later the worker abandons the handler and frees its slot.
 *
 * Every call names the worker (`Jobq-Worker`, `Jobq-Worker-Sdk`, `Jobq-Worker-Host`
 * headers), so `GET /v1/workers` lists it; with no call for `presenceSeconds` it says it
 * is alive (`POST /v1/workers/{id}/presence`). Quieted by an admin (`jobq workers quiet
 * ID`), it leases no more from its next call on, finishes the jobs it holds, then idles
 * (pinging) until resumed or stopped, as Sidekiq's quiet.
 */
export class Worker {
  readonly client: Client<paths>;
  readonly workerId: string;
  private readonly handlers = new Map<string, Handler>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly leasing = new AbortController();
  private stopping = false;
  /** Outcomes for the run loop to send with its next lease (while it waits for a slot). */
  private pending: { ack: Ack; jobId: number }[] = [];
  /** A lease call is under way: a finished job acknowledges itself meanwhile. */
  private inLease = false;
  private readonly log: (message: string) => void;
  /** What every call sends, naming this worker. */
  private readonly headers: Record<string, string>;
  /** An admin asked it to lease no more. */
  private quiet = false;
  /** Ends the wait of a quiet run loop (resumed, or stopping). */
  private wake: (() => void) | undefined;
  private lastCall = Date.now();

  constructor(private readonly options: WorkerOptions) {
    this.client = options.client ?? createJobq();
    this.workerId = options.workerId ?? `node-${process.pid}`;
    this.log = options.log ?? ((message) => console.log(message));
    this.headers = {
      "Jobq-Worker": this.workerId,
      "Jobq-Worker-Sdk": `${SDK_NAME}/${SDK_VERSION}`,
      "Jobq-Worker-Host": hostname(),
    };
  }

  /** The options of a call naming this worker (noted as its last sign of life). */
  private named<T extends object>(init: T): T & { headers: Record<string, string> } {
    this.lastCall = Date.now();
    return { ...init, headers: this.headers };
  }

  /** Note what a leasing answer says: a quiet worker leases no more. */
  private heard(response: Response): void {
    if (response.headers.get(QUIET_HEADER) === "1") this.setQuiet(true);
  }

  private setQuiet(quiet: boolean): void {
    if (quiet === this.quiet) return;
    this.quiet = quiet;
    if (quiet) {
      this.log(`worker ${this.workerId}: quiet: leasing no more until resumed (${this.running.size} jobs running)`);
    } else {
      this.log(`worker ${this.workerId}: resumed: leasing again`);
      this.wake?.();
    }
  }

  /** Say the worker is alive when it made no call for `presenceSeconds`; quiet, ask
   * whether it is resumed. */
  private async presence(): Promise<void> {
    const every = (this.options.presenceSeconds ?? 15) * 1000;
    if (!this.quiet && Date.now() - this.lastCall < every) return;
    try {
      const { data, error } = await this.client.POST(
        "/v1/workers/{worker_id}/presence",
        this.named({
          params: { path: { worker_id: this.workerId } },
          body: { queues: this.options.queues, types: [...this.handlers.keys()] },
        }),
      );
      if (error) this.log(`presence ping refused: ${new JobqError(error).message}`);
      else this.setQuiet(data.quiet);
    } catch (error) {
      this.log(`presence ping failed (${String(error)})`);
    }
  }

  /** Run `handler` for jobs of `type`. */
  handle(type: string, handler: Handler): this {
    this.handlers.set(type, handler);
    return this;
  }

  /** Lease no more; running handlers finish (`graceSeconds`). */
  stop(): void {
    this.stopping = true;
    this.leasing.abort();
    this.wake?.();
  }

  /** `run()`, stopping on SIGTERM or SIGINT. */
  async runUntilSignal(): Promise<void> {
    const stop = (signal: string) => {
      this.log(`${signal}: finishing the jobs in hand, leasing no more`);
      this.stop();
    };
    process.once("SIGTERM", () => stop("SIGTERM"));
    process.once("SIGINT", () => stop("SIGINT"));
    await this.run();
  }

  /** Lease and run jobs until `stop()`. */
  async run(): Promise<void> {
    const concurrency = this.options.concurrency ?? 4;
    const pings = setInterval(() => void this.presence(), (this.options.presenceSeconds ?? 15) * 1000);
    try {
      await this.leaseLoop(concurrency);
    } finally {
      clearInterval(pings);
    }
    await this.sendPending();
    const grace = (this.options.graceSeconds ?? 30) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise((resolve) => {
      timer = setTimeout(resolve, grace);
    });
    await Promise.race([Promise.allSettled(this.running.values()), late]);
    clearTimeout(timer);
  }

  private async leaseLoop(concurrency: number): Promise<void> {
    while (!this.stopping) {
      if (this.quiet) {
        // until resumed (a presence ping's answer) or stopped; running jobs finish
        // meanwhile, each acknowledged on its own (no lease to send it with)
        await this.sendPending();
        if (!this.quiet || this.stopping) continue;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
        continue;
      }
      const free = concurrency - this.running.size;
      if (free <= 0) {
        await Promise.race(this.running.values());
        continue;
      }
      this.inLease = true;
      try {
        let leases = this.pending.length ? await this.ackAndLease(free) : [];
        if (!leases.length && !this.stopping) leases = await this.lease(free);
        for (const lease of leases) {
          const done = this.execute(lease).finally(() => this.running.delete(lease.lease_id));
          this.running.set(lease.lease_id, done);
        }
      } finally {
        this.inLease = false;
      }
    }
  }

  private leaseBody(free: number, waitSeconds: number) {
    return {
      queues: this.options.queues,
      types: [...this.handlers.keys()],
      max_jobs: free,
      wait_seconds: waitSeconds,
      worker_id: this.workerId,
      lease_seconds: this.options.leaseSeconds,
    };
  }

  /** Send the pending outcomes with a lease of up to `free` jobs (no waiting for one). */
  private async ackAndLease(free: number): Promise<Lease[]> {
    const sent = this.pending.splice(0);
    try {
      const { data, error, response } = await this.client.POST(
        "/v1/acks",
        this.named({ body: { acks: sent.map((p) => p.ack), lease: this.leaseBody(free, 0) } }),
      );
      this.heard(response);
      if (!error) {
        data.results.forEach((result, i) => {
          if (result.status !== 200) this.log(`the ack of job ${sent[i]?.jobId} was refused: ${result.code}`);
        });
        return data.leases ?? [];
      }
    } catch {
      // sent again on their own, below
    }
    await this.sendEach(sent);
    return [];
  }

  /** The outcomes still pending, each on its own (the worker is stopping). */
  private async sendPending(): Promise<void> {
    await this.sendEach(this.pending.splice(0));
  }

  private async sendEach(outcomes: { ack: Ack; jobId: number }[]): Promise<void> {
    await Promise.all(outcomes.map(({ ack, jobId }) => this.send(ack, jobId)));
  }

  private async lease(free: number): Promise<Lease[]> {
    try {
      const { data, error, response } = await this.client.POST(
        "/v1/leases",
        this.named({
          body: this.leaseBody(free, Math.min(this.options.waitSeconds ?? 20, 30)),
          signal: this.leasing.signal,
        }),
      );
      this.heard(response);
      if (error) {
        this.log(`leasing refused: ${new JobqError(error).message}`);
        await sleep(1000);
        return [];
      }
      return data.leases;
    } catch (error) {
      if (this.stopping) return [];
      this.log(`leasing failed (${String(error)}); trying again`);
      await sleep(1000);
      return [];
    }
  }

  private async execute(lease: Lease): Promise<void> {
    const handler = this.handlers.get(lease.job.type);
    const aborted = new AbortController();
    let cancelRequested = lease.job.cancel_requested;
    let lost = false;
    const beat = async (progress?: { percent?: number; stage?: string; message?: string }) => {
      const { data, error } = await this.client.POST(
        "/v1/leases/{lease_id}/heartbeat",
        this.named({ params: { path: { lease_id: lease.lease_id } }, body: progress ? { progress } : {} }),
      );
      if (error) {
        if (error.status === 404 || error.status === 409) {
          lost = true;
          aborted.abort();
        }
        throw new JobqError(error);
      }
      if (data.cancel_requested && !cancelRequested) {
        cancelRequested = true;
        aborted.abort();
      }
    };
    const every = Math.max(1, (this.options.leaseSeconds ?? lease.job.lease_seconds) / 3) * 1000;
    const timer = setInterval(() => beat().catch(() => undefined), every);
    // The job's timeout, counted from now on this machine (the service's began a moment
    // before): cancel cooperatively (the signal), then abandon the handler.
    let timedOut = false;
    let graceTimer: NodeJS.Timeout | undefined;
    let timeoutTimer: NodeJS.Timeout | undefined;
    const abandoned = new Promise<typeof TIMED_OUT>((resolve) => {
      const seconds = lease.job.timeout_seconds;
      if (seconds == null) return;
      timeoutTimer = setTimeout(() => {
        timedOut = true;
        lost = true; // the service refuses this lease from now on
        aborted.abort();
        graceTimer = setTimeout(() => resolve(TIMED_OUT), (this.options.timeoutGraceSeconds ?? 5) * 1000);
      }, seconds * 1000);
    });
    const context: JobContext = {
      job: lease.job,
      parents: lease.parents,
      get cancelRequested() {
        return cancelRequested;
      },
      get timedOut() {
        return timedOut;
      },
      signal: aborted.signal,
      progress: (percent, stage, message) => beat({ percent, stage, message }),
    };
    const started = Date.now();
    try {
      if (!handler) throw new Permanent(`no handler for ${lease.job.type}`);
      const result = await Promise.race([handling(lease.job, () => handler(context)), abandoned]);
      if (timedOut) {
        const how = result === TIMED_OUT ? "abandoned" : "stopped";
        this.log(`job ${lease.job.id} (${lease.job.type}) timed out after ${lease.job.timeout_seconds} s: ${how}`);
        return;
      }
      if (lost) return;
      await this.finish(lease, { lease_id: lease.lease_id, outcome: "complete", result: result ?? null });
      this.log(`job ${lease.job.id} (${lease.job.type}) succeeded in ${Date.now() - started} ms`);
    } catch (error) {
      if (timedOut) {
        this.log(`job ${lease.job.id} (${lease.job.type}) timed out after ${lease.job.timeout_seconds} s: stopped`);
        return;
      }
      if (lost) return;
      if (error instanceof Snooze && (await this.snooze(lease, error.seconds))) return;
      const failure = error instanceof Error ? error : new Error(String(error));
      await this.finish(lease, {
        lease_id: lease.lease_id,
        outcome: "fail",
        error: { type: failure.name, message: failure.message },
        retryable: !(failure instanceof Permanent) && !cancelRequested,
        retry_after_seconds: failure instanceof Retry ? failure.after : undefined,
      });
      this.log(`job ${lease.job.id} (${lease.job.type}) failed: ${failure.name}: ${failure.message}`);
    } finally {
      clearInterval(timer);
      clearTimeout(timeoutTimer);
      clearTimeout(graceTimer);
    }
  }

  /** Put the job back for `seconds`, spending no attempt; false when the service refused
   * (past its cap on snoozes: the attempt then fails). */
  private async snooze(lease: Lease, seconds: number): Promise<boolean> {
    const { error } = await this.client.POST(
      "/v1/leases/{lease_id}/snooze",
      this.named({ params: { path: { lease_id: lease.lease_id } }, body: { seconds } }),
    );
    if (error && error.code === "snooze_limit_reached") {
      this.log(`job ${lease.job.id} (${lease.job.type}) may not snooze again: failing the attempt`);
      return false;
    }
    if (error) this.log(`the snooze of job ${lease.job.id} was refused: ${new JobqError(error).message}`);
    else this.log(`job ${lease.job.id} (${lease.job.type}) snoozed for ${seconds} s`);
    return true;
  }

  /** Hand the outcome to the run loop when it waits for this slot (it sends it with its
   * next lease); else (leasing, stopping or quiet) send it now. */
  private async finish(lease: Lease, ack: Ack): Promise<void> {
    if (!this.inLease && !this.stopping && !this.quiet) {
      this.pending.push({ ack, jobId: lease.job.id });
      return;
    }
    await this.send(ack, lease.job.id);
  }

  private async send(ack: Ack, jobId: number): Promise<void> {
    const { lease_id: leaseId, outcome, ...body } = ack;
    const path = outcome === "complete" ? "/v1/leases/{lease_id}/complete" : "/v1/leases/{lease_id}/fail";
    const { error } = await this.client.POST(
      path,
      this.named({ params: { path: { lease_id: leaseId } }, body: body as never }),
    );
    if (error) this.log(`the ${outcome} of job ${jobId} was refused: ${new JobqError(error).message}`);
  }
}
