// jobq for Node and TypeScript: a client typed from openapi/openapi.json (openapi-fetch
// sends every request; `npm run generate` rebuilds src/schema.d.ts), and a Worker that
// leases as slots free up, heartbeats, reports progress, honours cancellation and stops
// gracefully.

import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Job = components["schemas"]["JobOut"];
export type JobIn = components["schemas"]["JobIn"];
export type Lease = components["schemas"]["LeaseOut"];
export type Parent = components["schemas"]["ParentOut"];
export type Problem = components["schemas"]["Problem"];
export type JobqClient = Client<paths>;

/** A client of the jobq service at `url` (default `JOBQ_URL`, else 127.0.0.1:8000). */
export function createJobq(options: { url?: string; apiKey?: string } = {}): JobqClient {
  const url = options.url ?? process.env.JOBQ_URL ?? "http://127.0.0.1:8000";
  const apiKey = options.apiKey ?? process.env.JOBQ_API_KEY;
  return createClient<paths>({
    baseUrl: url,
    headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
  });
}

/** The service refused a call: its problem (status, stable `code`, detail). */
export class JobqError extends Error {
  override name = "JobqError";
  constructor(readonly problem: Problem) {
    super(`${problem.status} ${problem.code}: ${problem.detail ?? problem.title}`);
  }
}

/** Throw from a handler when retrying cannot help: the job fails for good. */
export class Permanent extends Error {
  override name = "Permanent";
}

/** Throw from a handler to run the job again `after` seconds from now. */
export class Retry extends Error {
  override name = "Retry";
  constructor(readonly after: number, message = `retry in ${after}s`) {
    super(message);
  }
}

/** What a handler gets: the job, its parents' results, progress, cancellation. */
export interface JobContext {
  readonly job: Job;
  readonly parents: Parent[];
  /** True once an operator asked to cancel the job (seen on a heartbeat). */
  readonly cancelRequested: boolean;
  /** Aborted when cancellation is requested or the lease is lost: pass it to fetch(). */
  readonly signal: AbortSignal;
  /** Report progress now (it also extends the lease). */
  progress(percent?: number, stage?: string, message?: string): Promise<void>;
}

export type Handler = (context: JobContext) => unknown;

export interface WorkerOptions {
  client?: JobqClient;
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
  log?: (message: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Leases jobs of its handlers' types as slots free up (never more than `concurrency`
 * at once), heartbeats every third of a lease, completes a job with its handler's
 * return value or fails it with the thrown error (`Permanent`: for good; `Retry`: after
 * a delay). `stop()` (or SIGTERM with `runUntilSignal`) leases no more and lets running
 * handlers finish.
 */
export class Worker {
  readonly client: JobqClient;
  readonly workerId: string;
  private readonly handlers = new Map<string, Handler>();
  private readonly running = new Map<string, Promise<void>>();
  private readonly leasing = new AbortController();
  private stopping = false;
  private readonly log: (message: string) => void;

  constructor(private readonly options: WorkerOptions) {
    this.client = options.client ?? createJobq();
    this.workerId = options.workerId ?? `node-${process.pid}`;
    this.log = options.log ?? ((message) => console.log(message));
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
    while (!this.stopping) {
      const free = concurrency - this.running.size;
      if (free <= 0) {
        await Promise.race(this.running.values());
        continue;
      }
      const leases = await this.lease(free);
      for (const lease of leases) {
        const done = this.execute(lease).finally(() => this.running.delete(lease.lease_id));
        this.running.set(lease.lease_id, done);
      }
    }
    const grace = (this.options.graceSeconds ?? 30) * 1000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise((resolve) => {
      timer = setTimeout(resolve, grace);
    });
    await Promise.race([Promise.allSettled(this.running.values()), late]);
    clearTimeout(timer);
  }

  private async lease(free: number): Promise<Lease[]> {
    try {
      const { data, error } = await this.client.POST("/v1/leases", {
        body: {
          queues: this.options.queues,
          types: [...this.handlers.keys()],
          max_jobs: free,
          wait_seconds: Math.min(this.options.waitSeconds ?? 20, 30),
          worker_id: this.workerId,
          lease_seconds: this.options.leaseSeconds,
        },
        signal: this.leasing.signal,
      });
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
      const { data, error } = await this.client.POST("/v1/leases/{lease_id}/heartbeat", {
        params: { path: { lease_id: lease.lease_id } },
        body: progress ? { progress } : {},
      });
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
    const context: JobContext = {
      job: lease.job,
      parents: lease.parents,
      get cancelRequested() {
        return cancelRequested;
      },
      signal: aborted.signal,
      progress: (percent, stage, message) => beat({ percent, stage, message }),
    };
    const started = Date.now();
    try {
      if (!handler) throw new Permanent(`no handler for ${lease.job.type}`);
      const result = await handler(context);
      if (lost) return;
      await this.finish(lease, "complete", { result: result ?? null });
      this.log(`job ${lease.job.id} (${lease.job.type}) succeeded in ${Date.now() - started} ms`);
    } catch (error) {
      if (lost) return;
      const failure = error instanceof Error ? error : new Error(String(error));
      await this.finish(lease, "fail", {
        error: { type: failure.name, message: failure.message },
        retryable: !(failure instanceof Permanent) && !cancelRequested,
        retry_after_seconds: failure instanceof Retry ? failure.after : undefined,
      });
      this.log(`job ${lease.job.id} (${lease.job.type}) failed: ${failure.name}: ${failure.message}`);
    } finally {
      clearInterval(timer);
    }
  }

  private async finish(
    lease: Lease,
    outcome: "complete" | "fail",
    body: Record<string, unknown>,
  ): Promise<void> {
    const path = outcome === "complete" ? "/v1/leases/{lease_id}/complete" : "/v1/leases/{lease_id}/fail";
    const { error } = await this.client.POST(path, {
      params: { path: { lease_id: lease.lease_id } },
      body: body as never,
    });
    if (error) this.log(`the ${outcome} of job ${lease.job.id} was refused: ${new JobqError(error).message}`);
  }
}
