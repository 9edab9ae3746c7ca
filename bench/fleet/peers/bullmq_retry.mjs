// BullMQ 6 (from the npm registry, with ioredis 5, its peer dependency): a job
// retried with backoff past its overall deadline, for
// bench/fleet/retry_vs_bullmq.sh; prints one JSON line. BULLMQ_DIR names the
// folder whose node_modules hold bullmq (the script: build/peers/bullmq).
//
//   node bullmq_retry.mjs REDIS_URL JOBS CONCURRENCY
//
// Starts one Worker with concurrency CONCURRENCY on an ioredis connection of
// its own and waits until it is ready, then enqueues JOBS jobs in one
// queue.addBulk, each with attempts: 5 and backoff {type: 'exponential',
// delay: 500} (BullMQ's own retry policy: waits of 500, 1,000, 2,000 and
// 4,000 ms, no jitter, its default) and data {deadline: Date.now() + 2000},
// taken just before the addBulk. BullMQ has no notion of a job's deadline, so
// the deadline travels as data only; the processor's first act is to note its
// start (Date.now()) against it (an attempt that starts after it is useless:
// nobody waits for its result any more), then it throws. Done when all JOBS
// jobs are in the failed set (queue.getFailedCount(), polled every 50 ms) or
// after 60 s; the attempts the failed jobs record (attemptsMade) are summed
// as a cross-check of the processor's own count.
//
// Settings: connections with maxRetriesPerRequest: null, which its Worker
// requires; removeOnComplete: true as in bullmq_bench.mjs; failed jobs kept
// (BullMQ's default), since the failed set is how the end is seen;
// everything else BullMQ's defaults (delayed jobs promoted by the worker).
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(join(process.env.BULLMQ_DIR ?? '.', 'package.json'));
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const QUEUE = 'retrybench';
const ATTEMPTS = 5;
const BACKOFF_MS = 500;
const DEADLINE_MS = 2000;
const TIMEOUT_MS = 60000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const connect = (url) => new IORedis(url, { maxRetriesPerRequest: null });

async function main() {
  const [url, jobsArg, concurrencyArg] = process.argv.slice(2);
  if (!url || !jobsArg || !concurrencyArg) {
    console.error('usage: node bullmq_retry.mjs REDIS_URL JOBS CONCURRENCY');
    process.exit(2);
  }
  const jobs = Number(jobsArg);
  const concurrency = Number(concurrencyArg);

  let attempts = 0;
  let useless = 0;
  let lateMsMax = 0;
  const byAttempt = {}; // attempt number (1 = the first) -> [started, useless]
  const processor = async (job) => {
    const start = Date.now();
    const n = job.attemptsMade + 1; // attemptsMade: the attempts that failed before this one
    attempts += 1;
    byAttempt[n] ??= [0, 0];
    byAttempt[n][0] += 1;
    if (start > job.data.deadline) {
      useless += 1;
      byAttempt[n][1] += 1;
      lateMsMax = Math.max(lateMsMax, start - job.data.deadline);
    }
    throw new Error('always fails');
  };

  const producer = connect(url); // given, not owned: queue.close() leaves it open
  const queue = new Queue(QUEUE, { connection: producer });
  await queue.waitUntilReady();
  const worker = new Worker(QUEUE, processor, { connection: connect(url), concurrency });
  worker.on('error', (e) => console.error(e));
  await worker.waitUntilReady();

  const deadline = Date.now() + DEADLINE_MS;
  const opts = { attempts: ATTEMPTS, backoff: { type: 'exponential', delay: BACKOFF_MS }, removeOnComplete: true };
  const t0 = Date.now();
  await queue.addBulk(Array.from({ length: jobs }, () => ({ name: 'flaky', data: { deadline }, opts })));

  let failed = 0;
  while ((failed = await queue.getFailedCount()) < jobs && Date.now() - t0 < TIMEOUT_MS) await sleep(50);
  const seconds = (Date.now() - t0) / 1000;
  const failedJobs = await queue.getFailed(0, -1);
  const recorded = failedJobs.reduce((sum, j) => sum + j.attemptsMade, 0);
  await worker.close();
  await queue.close();
  producer.disconnect();

  console.log(JSON.stringify({
    system: 'bullmq', jobs, finished: failed, timed_out: failed < jobs, attempts, useless,
    attempts_recorded_by_jobs: recorded, late_ms_max: lateMsMax, seconds,
    by_attempt: Object.fromEntries(Object.entries(byAttempt).map(([n, [s, u]]) => [n, { started: s, useless: u }])),
  }));
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
