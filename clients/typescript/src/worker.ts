// An example worker on the jobq package (src/index.ts): three handlers, a typed client,
// graceful stop on SIGTERM or Ctrl-C.
//
//   JOBQ_URL=http://127.0.0.1:8000 JOBQ_QUEUES=default npm start
//
// Environment: JOBQ_URL, JOBQ_API_KEY (sent as a Bearer token), JOBQ_QUEUES
// (comma-separated), JOBQ_WORKER_ID, JOBQ_MAX_JOBS (stop after that many jobs; 0, the
// default, runs until SIGTERM or Ctrl-C).

import { Permanent, Worker } from "./index.js";

const env = process.env;
const maxJobs = Number(env.JOBQ_MAX_JOBS ?? "0");
let finished = 0;

const worker = new Worker({
  queues: (env.JOBQ_QUEUES ?? "default").split(",").filter(Boolean),
  workerId: env.JOBQ_WORKER_ID,
  concurrency: 2,
  waitSeconds: 1,
  log: (message) => {
    console.log(message);
    if (/ (succeeded|failed)/.test(message) && ++finished === maxJobs) {
      console.log(`stopped after ${maxJobs} jobs`);
      worker.stop();
    }
  },
});

worker
  .handle("add", async ({ job, progress }) => {
    const { a, b } = job.payload as { a: number; b: number };
    await progress(50, "adding");
    return { sum: a + b };
  })
  .handle("shout", async ({ job, progress }) => {
    const { text } = job.payload as { text: string };
    await progress(50, "shouting");
    return { text: text.toUpperCase() };
  })
  .handle("divide", async ({ job, progress }) => {
    const { a, b } = job.payload as { a: number; b: number };
    await progress(10, "checking");
    if (b === 0) throw new Permanent(`cannot divide ${a} by zero`);
    return { quotient: a / b };
  });

await worker.runUntilSignal();
