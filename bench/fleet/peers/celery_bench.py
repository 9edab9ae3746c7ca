"""Celery (Debian's python3-celery 5.2, kombu's Redis transport) in the three
shapes of bench/fleet/vs_peers.sh; prints one JSON line.

  python3 celery_bench.py drain REDIS_URL JOBS CONCURRENCY
    Enqueues JOBS empty tasks, then starts one `celery worker --pool eventlet
    --concurrency CONCURRENCY` process and times, inside it, from its
    worker_ready signal (or its first task, if sooner) to the JOBS-th task's
    end. Celery has no bulk enqueue: a group is sent as one apply_async per
    task, so this calls apply_async in a loop on one producer (what a group
    does, without a group's id on every message). Redis commands a job: INFO
    commandstats after the drain, CONFIG RESETSTAT before the enqueue (every
    command of both phases, the worker's start-up included).
  python3 celery_bench.py overload REDIS_URL RATE SECONDS CONCURRENCY [expires]
    Starts one worker (same pool), waits for worker_ready, then offers RATE
    tasks/s on a fixed schedule for SECONDS (a producer behind schedule sends
    at once), each carrying its send time (CLOCK_MONOTONIC). A task sleeps
    10 ms; it is in time if it started within 500 ms of its send. With
    `expires`, each is sent with expires=0.5, Celery's own freshness bound:
    the worker discards (revokes) a task it receives after that. Counts are
    read FRESHNESS + 2 service times after the offering, as hourglass-bench
    does, then the worker is stopped.
  python3 celery_bench.py latency REDIS_URL RATE SECONDS CONCURRENCY
    Enqueue-to-start latency. Starts one worker (same pool), waits for
    worker_ready, then offers RATE empty tasks/s on a fixed schedule for
    SECONDS (a producer behind schedule sends at once), one apply_async each,
    carrying its send time (CLOCK_MONOTONIC). The task's first act is to note
    its start time less that send time, in the worker's memory; once all the
    tasks offered have run, the worker writes them out and the harness prints
    their p50 and p99 (nearest rank below, as hourglass-bench). vs_peers.sh
    offers half the drain rate it just measured: at capacity a queue's wait is
    its backlog, which grows for as long as the offering lasts; at half of it
    the wait is what the system adds on its own (fetch, dispatch, start) plus
    the modest queueing any busy server has, and systems of different capacity
    are compared at the same load.

Settings: the eventlet pool, the one Celery 5.2's documentation recommends
for I/O-bound tasks ("Concurrency with Eventlet"; prefork is for CPU-bound
work, and 10 waiting jobs should not need 10 processes); CELERY_POOL=gevent
or threads picks another. On a green pool Celery 5.2 builds its result
backend anew for every task (its thread-local cache misses on each new
greenlet: celery/celery#7960), and each build scans every installed Python
package's entry points, so that cost grows with the packages on the machine.
task_ignore_result, as its docs advise when results are not read (no result
backend is set anyway); everything else Celery's defaults (prefetch
multiplier 4, ack on receipt, mingle, gossip and heartbeats on). The worker
counts drained tasks in its own memory (under a lock), so the drain costs
Redis nothing but Celery's own commands; so do the latency tasks, their waits;
under overload each task adds one HINCRBY, its tally.

Runs on Debian's /usr/bin/python3 (where python3-celery is installed).
"""
import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import redis
from celery import Celery
from celery.signals import worker_ready

FRESHNESS = 0.5
SERVICE = 0.010
TALLY = "peerbench:overload"
POOL = os.environ.get("CELERY_POOL", "eventlet")

app = Celery("celery_bench", broker=os.environ.get("BENCH_REDIS", "redis://127.0.0.1:6379"))
app.conf.task_ignore_result = True


class Tally:
    """The worker process's own record: when it started and when the drain ended; each latency task's wait."""
    t0 = None
    done = 0
    waits = []
    lock = threading.Lock()
    counter = None


def write(path, body):
    with open(path + ".tmp", "w") as f:
        f.write(body)
    os.rename(path + ".tmp", path)


@worker_ready.connect
def on_ready(**_):
    if Tally.t0 is None:
        Tally.t0 = time.monotonic()
    write(os.environ["BENCH_OUT"] + ".ready", "")


@app.task(name="celery_bench.empty")  # the same name run as a script or imported
def empty():
    if Tally.t0 is None:
        Tally.t0 = time.monotonic()
    with Tally.lock:  # a green lock on eventlet and gevent (monkey-patched), a real one on threads
        Tally.done += 1
        last = Tally.done == int(os.environ["BENCH_JOBS"])
    if last:
        write(os.environ["BENCH_OUT"], json.dumps({"seconds": time.monotonic() - Tally.t0}))


@app.task(name="celery_bench.stamped")
def stamped(sent):
    wait = time.monotonic() - sent
    with Tally.lock:
        Tally.waits.append(wait)
        last = len(Tally.waits) == int(os.environ["BENCH_JOBS"])
    if last:
        write(os.environ["BENCH_OUT"], json.dumps({"waits": Tally.waits}))


@app.task(name="celery_bench.sleeper")
def sleeper(sent):
    late = time.monotonic() - sent > FRESHNESS
    time.sleep(SERVICE)  # green: eventlet patches time.sleep
    if Tally.counter is None:
        Tally.counter = redis.Redis.from_url(os.environ["BENCH_REDIS"])
    Tally.counter.hincrby(TALLY, "late" if late else "in_time", 1)


# ---- the harness (run as a script) ----

def start_worker(url, concurrency, out, jobs=0):
    env = dict(os.environ, BENCH_REDIS=url, BENCH_OUT=out, BENCH_JOBS=str(jobs),
               PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    log = open(out + ".log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_bench", "worker", "--pool", POOL,
         "--concurrency", str(concurrency), "--loglevel", "WARNING"],
        env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    atexit.register(stop_worker, proc)  # a harness that failed leaves none
    return proc


def wait_for(path, proc, log, limit):
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if proc.poll() is not None:
            sys.exit("celery worker exited early:\n" + open(log).read())
        if time.monotonic() > deadline:
            sys.exit(f"celery: no {path} after {limit} s")
        time.sleep(0.001)


def stop_worker(proc):
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def redis_calls(r):
    return sum(v["calls"] for k, v in r.info("commandstats").items() if k.startswith("cmdstat_"))


def drain(url, jobs, concurrency, tmp):
    r = redis.Redis.from_url(url)
    r.config_resetstat()
    t0 = time.monotonic()
    with app.producer_or_acquire() as producer:
        for _ in range(jobs):
            empty.apply_async(producer=producer)
    enqueue = jobs / (time.monotonic() - t0)
    out = os.path.join(tmp, "drain")
    proc = start_worker(url, concurrency, out, jobs)
    wait_for(out, proc, out + ".log", max(120, jobs / 50))
    calls = redis_calls(r) - 1  # less CONFIG RESETSTAT
    stop_worker(proc)
    seconds = json.load(open(out))["seconds"]
    return {"system": "celery", "shape": "drain", "jobs": jobs, "enqueue_jobs_per_s": enqueue,
            "drain_jobs_per_s": jobs / seconds, "redis_calls_per_job": calls / jobs}


def overload(url, rate, length, concurrency, expires, tmp):
    r = redis.Redis.from_url(url)
    r.delete(TALLY)
    out = os.path.join(tmp, "overload")
    proc = start_worker(url, concurrency, out)
    wait_for(out + ".ready", proc, out + ".log", 60)
    options = {"expires": FRESHNESS} if expires else {}
    total = int(rate * length)
    with app.producer_or_acquire() as producer:
        t0 = time.monotonic()
        for i in range(total):
            ahead = t0 + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            sleeper.apply_async((time.monotonic(),), producer=producer, **options)
        offered_for = max(time.monotonic() - t0, length)
    time.sleep(FRESHNESS + 2 * SERVICE)
    tally = {k.decode(): int(v) for k, v in r.hgetall(TALLY).items()}
    stop_worker(proc)
    in_time, late = tally.get("in_time", 0), tally.get("late", 0)
    return {"system": "celery (expires)" if expires else "celery", "shape": "overload", "offered": total,
            "offered_per_s": total / offered_for, "refused": 0, "ran": in_time + late, "ran_in_time": in_time,
            "ran_too_late": late, "goodput_per_s": in_time / offered_for, "capacity_per_s": concurrency / SERVICE}


def percentile_ms(waits, q):
    """Nearest rank below, as hourglass-bench: the (q * (n - 1))-th of the sorted waits."""
    return waits[int(q * (len(waits) - 1))] * 1000


def latency(url, rate, length, concurrency, tmp):
    total = int(rate * length)
    out = os.path.join(tmp, "latency")
    proc = start_worker(url, concurrency, out, total)
    wait_for(out + ".ready", proc, out + ".log", 60)
    with app.producer_or_acquire() as producer:
        t0 = time.monotonic()
        for i in range(total):
            ahead = t0 + i / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            stamped.apply_async((time.monotonic(),), producer=producer)
        offered_for = max(time.monotonic() - t0, length)
    wait_for(out, proc, out + ".log", 60)
    stop_worker(proc)
    waits = sorted(json.load(open(out))["waits"])
    return {"system": "celery", "shape": "latency", "rate": rate, "offered": total,
            "offered_per_s": total / offered_for, "ran": len(waits),
            "latency_p50_ms": percentile_ms(waits, 0.5), "latency_p99_ms": percentile_ms(waits, 0.99)}


def main(argv):
    usage = (f"usage: {argv[0]} drain URL JOBS CONCURRENCY | overload URL RATE SECONDS CONCURRENCY [expires]"
             " | latency URL RATE SECONDS CONCURRENCY")
    if len(argv) < 5:
        sys.exit(usage)
    mode, url = argv[1], argv[2]
    app.conf.broker_url = url
    with tempfile.TemporaryDirectory(prefix="celery-bench") as tmp:
        if mode == "drain":
            result = drain(url, int(argv[3]), int(argv[4]), tmp)
        elif mode == "overload" and len(argv) >= 6:
            result = overload(url, float(argv[3]), float(argv[4]), int(argv[5]),
                              len(argv) > 6 and argv[6] == "expires", tmp)
        elif mode == "latency" and len(argv) >= 6:
            result = latency(url, float(argv[3]), float(argv[4]), int(argv[5]), tmp)
        else:
            sys.exit(usage)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv)
