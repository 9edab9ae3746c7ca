// BullMQ 6 (from the npm registry, with ioredis 5, its peer dependency) in the three shapes of
// bench/fleet/vs_peers.sh; prints one JSON line. BULLMQ_DIR names the folder
// whose node_modules hold bullmq (vs_peers.sh: build/peers/bullmq).
//
//   node bullmq_bench.mjs drain REDIS_URL JOBS CONCURRENCY
//     Enqueues JOBS empty jobs with queue.addBulk, 1,000 a call (as for
//     Sidekiq; one addBulk is one MULTI), then starts one worker process,
//     `new Worker(..., {concurrency: CONCURRENCY})` on an ioredis connection of
//     its own, and times, inside it, from waitUntilReady() (then run()) to the
//     JOBS-th job's end. Redis commands a job: INFO commandstats after the
//     drain, CONFIG RESETSTAT before the enqueue (every command of both phases,
//     scripts' inner calls and the worker's start-up included).
//   node bullmq_bench.mjs overload REDIS_URL RATE SECONDS CONCURRENCY
//     Starts one worker process, waits until it is ready, then offers RATE
//     jobs/s on a fixed schedule for SECONDS (a producer behind schedule sends
//     at once), one queue.add each, carrying its send time (CLOCK_MONOTONIC,
//     process.hrtime). A job sleeps 10 ms; it is in time if it started within
//     500 ms of its send. BullMQ has no freshness bound, so every job runs,
//     however late. Counts are read FRESHNESS + 2 service times after the
//     offering, as hourglass-bench does, then the worker is closed.
//   node bullmq_bench.mjs latency REDIS_URL RATE SECONDS CONCURRENCY
//     Enqueue-to-start latency. Starts one worker process, waits until it is
//     ready, then offers RATE empty jobs/s on a fixed schedule for SECONDS (a
//     producer behind schedule sends at once), one queue.add each, carrying
//     its send time (CLOCK_MONOTONIC, process.hrtime). The processor's first
//     act is to note its start time less that send time, in the worker's
//     memory; once all the jobs offered have run, the worker writes them out
//     and the harness prints their p50 and p99 (nearest rank below, as
//     hourglass-bench). vs_peers.sh offers half the drain rate it just
//     measured: at capacity a queue's wait is its backlog, which grows for as
//     long as the offering lasts; at half of it the wait is what the system
//     adds on its own (fetch, dispatch, start) plus the modest queueing any
//     busy server has, and systems of different capacity are compared at the
//     same load.
//
// Settings: removeOnComplete: true and removeOnFail: 1000 on every job, the
// auto-removal BullMQ's "going to production" guide asks for (without it each
// completed job stays in Redis); connections with maxRetriesPerRequest: null,
// which its Worker requires; everything else BullMQ's defaults. The worker
// counts drained jobs in its own memory, so the drain costs Redis nothing but
// BullMQ's own commands; so do the latency jobs, their waits; under overload
// each job adds one HINCRBY, its tally.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(process.env.BULLMQ_DIR ?? '.', 'package.json'));
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');

const FRESHNESS = 0.5;
const SERVICE = 0.010;
const TALLY = 'peerbench:overload';
const QUEUE = 'peerbench';
const jobOptions = { removeOnComplete: true, removeOnFail: 1000 };

const now = () => Number(process.hrtime.bigint()) / 1e9;
const sleep = (s) => new Promise((resolve) => setTimeout(resolve, s * 1000));
const connect = (url) => new IORedis(url, { maxRetriesPerRequest: null });

function write(path, body) {
  writeFileSync(`${path}.tmp`, body);
  renameSync(`${path}.tmp`, path);
}

// ---- the worker process ----

async function worker(url, concurrency, out, jobs) {
  let t0 = null;
  let done = 0;
  const waits = [];
  const counter = connect(url);
  const processor = async (job) => {
    if (job.name === 'stamped') {
      waits.push(now() - job.data.sent);
      if (waits.length === jobs) write(out, JSON.stringify({ waits }));
      return;
    }
    if (job.name === 'empty') {
      if (++done === jobs) write(out, JSON.stringify({ seconds: now() - t0 }));
      return;
    }
    const late = now() - job.data.sent > FRESHNESS;
    await sleep(SERVICE);
    await counter.hincrby(TALLY, late ? 'late' : 'in_time', 1);
  };
  const w = new Worker(QUEUE, processor, { connection: connect(url), concurrency, autorun: false });
  w.on('error', (e) => console.error(e));
  await w.waitUntilReady();
  t0 = now();
  write(`${out}.ready`, '');
  process.on('SIGTERM', async () => {
    await w.close();
    process.exit(0);
  });
  await w.run();
}

// ---- the harness ----

function startWorker(url, concurrency, out, jobs = 0) {
  const log = openSync(`${out}.log`, 'w');
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'worker', url, String(concurrency), out, String(jobs)],
    { stdio: ['ignore', log, log], env: process.env });
  closeSync(log);
  child.exited = false;
  child.on('exit', () => { child.exited = true; });
  process.on('exit', () => { if (!child.exited) child.kill('SIGKILL'); }); // a harness that failed leaves none
  return child;
}

async function waitFor(path, child, log, limit) {
  const deadline = now() + limit;
  while (!existsSync(path)) {
    if (child.exited) throw new Error(`bullmq worker exited early:\n${readFileSync(log, 'utf8')}`);
    if (now() > deadline) throw new Error(`bullmq: no ${path} after ${limit} s`);
    await sleep(0.001);
  }
}

async function stopWorker(child) {
  if (child.exited) return;
  const gone = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30000);
  await gone;
  clearTimeout(timer);
}

async function redisCalls(r) {
  const info = await r.info('commandstats');
  return [...info.matchAll(/calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

async function drain(url, jobs, concurrency, dir) {
  const admin = connect(url);
  const producer = connect(url); // given, not owned: queue.close() leaves it open
  const queue = new Queue(QUEUE, { connection: producer, defaultJobOptions: jobOptions });
  await queue.waitUntilReady();
  await admin.config('RESETSTAT');
  const t0 = now();
  for (let i = 0; i < jobs; i += 1000) {
    const n = Math.min(1000, jobs - i);
    await queue.addBulk(Array.from({ length: n }, () => ({ name: 'empty', data: {} })));
  }
  const enqueue = jobs / (now() - t0);
  const out = join(dir, 'drain');
  const child = startWorker(url, concurrency, out, jobs);
  await waitFor(out, child, `${out}.log`, Math.max(120, jobs / 50));
  const calls = (await redisCalls(admin)) - 1; // less CONFIG RESETSTAT
  await stopWorker(child);
  const { seconds } = JSON.parse(readFileSync(out, 'utf8'));
  await queue.close();
  producer.disconnect();
  admin.disconnect();
  return { system: 'bullmq', shape: 'drain', jobs, enqueue_jobs_per_s: enqueue, drain_jobs_per_s: jobs / seconds,
    redis_calls_per_job: calls / jobs };
}

async function overload(url, rate, length, concurrency, dir) {
  const admin = connect(url);
  await admin.del(TALLY);
  const producer = connect(url); // given, not owned: queue.close() leaves it open
  const queue = new Queue(QUEUE, { connection: producer, defaultJobOptions: jobOptions });
  await queue.waitUntilReady();
  const out = join(dir, 'overload');
  const child = startWorker(url, concurrency, out);
  await waitFor(`${out}.ready`, child, `${out}.log`, 60);
  const total = Math.floor(rate * length);
  const t0 = now();
  for (let i = 0; i < total; ++i) {
    const ahead = t0 + i / rate - now();
    if (ahead > 0) await sleep(ahead);
    await queue.add('sleep', { sent: now() });
  }
  const offeredFor = Math.max(now() - t0, length);
  await sleep(FRESHNESS + 2 * SERVICE);
  const tally = await admin.hgetall(TALLY);
  await stopWorker(child);
  await queue.close();
  producer.disconnect();
  admin.disconnect();
  const inTime = Number(tally.in_time ?? 0);
  const late = Number(tally.late ?? 0);
  return { system: 'bullmq', shape: 'overload', offered: total, offered_per_s: total / offeredFor, refused: 0,
    ran: inTime + late, ran_in_time: inTime, ran_too_late: late, goodput_per_s: inTime / offeredFor,
    capacity_per_s: concurrency / SERVICE };
}

// Nearest rank below, as hourglass-bench: the (q * (n - 1))-th of the sorted waits.
const percentileMs = (sorted, q) => sorted[Math.floor(q * (sorted.length - 1))] * 1000;

async function latency(url, rate, length, concurrency, dir) {
  const producer = connect(url); // given, not owned: queue.close() leaves it open
  const queue = new Queue(QUEUE, { connection: producer, defaultJobOptions: jobOptions });
  await queue.waitUntilReady();
  const total = Math.floor(rate * length);
  const out = join(dir, 'latency');
  const child = startWorker(url, concurrency, out, total);
  await waitFor(`${out}.ready`, child, `${out}.log`, 60);
  const t0 = now();
  for (let i = 0; i < total; ++i) {
    const ahead = t0 + i / rate - now();
    if (ahead > 0) await sleep(ahead);
    await queue.add('stamped', { sent: now() });
  }
  const offeredFor = Math.max(now() - t0, length);
  await waitFor(out, child, `${out}.log`, 60);
  await stopWorker(child);
  await queue.close();
  producer.disconnect();
  const waits = JSON.parse(readFileSync(out, 'utf8')).waits.sort((a, b) => a - b);
  return { system: 'bullmq', shape: 'latency', rate, offered: total, offered_per_s: total / offeredFor,
    ran: waits.length, latency_p50_ms: percentileMs(waits, 0.5), latency_p99_ms: percentileMs(waits, 0.99) };
}

const [mode, url, ...rest] = process.argv.slice(2);
const usage = 'usage: bullmq_bench.mjs drain URL JOBS CONCURRENCY | overload URL RATE SECONDS CONCURRENCY'
  + ' | latency URL RATE SECONDS CONCURRENCY';
if (mode === 'worker') {
  await worker(url, Number(rest[0]), rest[1], Number(rest[2]));
} else {
  const dir = mkdtempSync(join(tmpdir(), 'bullmq-bench'));
  try {
    let result;
    if (mode === 'drain' && rest.length >= 2) result = await drain(url, Number(rest[0]), Number(rest[1]), dir);
    else if (mode === 'overload' && rest.length >= 3) {
      result = await overload(url, Number(rest[0]), Number(rest[1]), Number(rest[2]), dir);
    } else if (mode === 'latency' && rest.length >= 3) {
      result = await latency(url, Number(rest[0]), Number(rest[1]), Number(rest[2]), dir);
    } else {
      console.error(usage);
      process.exit(2);
    }
    console.log(JSON.stringify(result));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
