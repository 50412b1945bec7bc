// A jobq worker for Node on a client generated from openapi/openapi.json: every
// request below is typed by src/schema.d.ts (`npm run generate` rebuilds it), and
// openapi-fetch sends it. There is no hand-written request code.
//
//   JOBQ_URL=http://127.0.0.1:8000 JOBQ_QUEUES=default npm start
//
// Environment: JOBQ_URL, JOBQ_API_KEY (sent as a Bearer token), JOBQ_QUEUES
// (comma-separated), JOBQ_WORKER_ID, JOBQ_MAX_JOBS (exit after that many jobs; 0, the
// default, runs until SIGTERM or Ctrl-C).

import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Job = components["schemas"]["JobOut"];
type Lease = components["schemas"]["LeaseOut"];
type Problem = components["schemas"]["Problem"];
type Progress = (percent: number, stage: string) => Promise<void>;
type Handler = (job: Job, progress: Progress) => Promise<unknown>;

/** Thrown by a handler when retrying cannot help: the job fails for good. */
class Permanent extends Error {
  override name = "Permanent";
}

/** The lease no longer holds the job (409 lease_lost): drop it. */
class LeaseLost extends Error {
  override name = "LeaseLost";
}

const handlers: Record<string, Handler> = {
  async add(job, progress) {
    const { a, b } = job.payload as { a: number; b: number };
    await progress(50, "adding");
    return { sum: a + b };
  },
  async shout(job, progress) {
    const { text } = job.payload as { text: string };
    await progress(50, "shouting");
    return { text: text.toUpperCase() };
  },
  async divide(job, progress) {
    const { a, b } = job.payload as { a: number; b: number };
    await progress(10, "checking");
    if (b === 0) {
      throw new Permanent(`cannot divide ${a} by zero`);
    }
    return { quotient: a / b };
  },
};

const env = process.env;
const apiKey = env.JOBQ_API_KEY;
const queues = (env.JOBQ_QUEUES ?? "default").split(",").filter(Boolean);
const workerId = env.JOBQ_WORKER_ID ?? `node-${process.pid}`;
const maxJobs = Number(env.JOBQ_MAX_JOBS ?? "0");
const LEASE_BATCH = 10;
const WAIT_SECONDS = 5;

const client = createClient<paths>({
  baseUrl: env.JOBQ_URL ?? "http://127.0.0.1:8000",
  headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {},
});

let stopping = false;
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.on(signal, () => {
    console.log(`${signal}: finishing the jobs in hand, leasing no more`);
    stopping = true;
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const describe = (problem: Problem) => `${problem.status} ${problem.code}: ${problem.detail}`;

async function heartbeat(lease: Lease, progress?: { percent: number; stage: string }) {
  const { error } = await client.POST("/v1/leases/{lease_id}/heartbeat", {
    params: { path: { lease_id: lease.lease_id } },
    body: progress ? { progress } : {},
  });
  if (error) {
    if (error.code === "lease_lost" || error.code === "lease_not_found") {
      throw new LeaseLost(describe(error));
    }
    console.warn(`job ${lease.job.id}: heartbeat failed: ${describe(error)}`);
  }
}

async function run(lease: Lease): Promise<void> {
  const { job } = lease;
  const path = { lease_id: lease.lease_id };
  // Keep the lease alive while the handler works: a heartbeat every third of it.
  const beats = setInterval(
    () => heartbeat(lease).catch(() => undefined),
    (job.lease_seconds * 1000) / 3,
  );
  try {
    const handler = handlers[job.type];
    if (!handler) {
      throw new Permanent(`no handler for jobs of type ${job.type}`);
    }
    const result = await handler(job, (percent, stage) => heartbeat(lease, { percent, stage }));
    const { data, error } = await client.POST("/v1/leases/{lease_id}/complete", {
      params: { path },
      body: { result },
    });
    if (error) {
      console.warn(`job ${job.id}: complete refused: ${describe(error)}`);
    } else {
      console.log(`job ${data.id} (${data.type}) ${data.state}`);
    }
  } catch (caught) {
    if (caught instanceof LeaseLost) {
      console.warn(`job ${job.id}: ${caught.message}; dropped`);
      return;
    }
    const failure = caught instanceof Error ? caught : new Error(String(caught));
    const { data, error } = await client.POST("/v1/leases/{lease_id}/fail", {
      params: { path },
      body: {
        error: { type: failure.name, message: failure.message },
        retryable: !(failure instanceof Permanent),
      },
    });
    if (error) {
      console.warn(`job ${job.id}: fail refused: ${describe(error)}`);
    } else {
      console.log(`job ${data.id} (${data.type}) failed an attempt: now ${data.state}`);
    }
  } finally {
    clearInterval(beats);
  }
}

function lease(count: number) {
  return client.POST("/v1/leases", {
    body: {
      queues,
      types: Object.keys(handlers),
      max_jobs: count,
      wait_seconds: WAIT_SECONDS,
      worker_id: workerId,
    },
  });
}

async function main(): Promise<void> {
  console.log(`worker ${workerId} on ${queues.join(", ")}`);
  let handled = 0;
  while (!stopping && (maxJobs === 0 || handled < maxJobs)) {
    const wanted = maxJobs === 0 ? LEASE_BATCH : Math.min(LEASE_BATCH, maxJobs - handled);
    let answer: Awaited<ReturnType<typeof lease>>;
    try {
      answer = await lease(wanted);
    } catch (failure) {
      console.warn(`lease failed: ${String(failure)}; trying again in a second`);
      await sleep(1000);
      continue;
    }
    const { data, error } = answer;
    if (error) {
      console.warn(`lease failed: ${describe(error)}; trying again in a second`);
      await sleep(1000);
      continue;
    }
    await Promise.all(data.leases.map(run));
    handled += data.leases.length;
  }
  console.log(`worker ${workerId} stopped after ${handled} jobs`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
