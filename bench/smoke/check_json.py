#!/usr/bin/env python3
"""Runs a hourglass-bench command and checks that the last line of its
standard output is one JSON object with the keys docs/reference/cli.md promises.

usage: check_json.py {throughput|overload|http|fleet|cluster|cancel} -- COMMAND [ARGS...]
"""
import json
import subprocess
import sys

KEYS = {
    "throughput": ["hourglass_jobs_per_s", "moodycamel_jobs_per_s", "asio_jobs_per_s", "mutex_jobs_per_s"],
    "overload": ["capacity_rps", "runs"],
    "http": ["offered", "sent", "ok", "ok_in_deadline", "goodput_rps", "rejected", "deadline_exceeded",
             "errors", "latency_ms"],
    "fleet": ["broker", "capacity_per_s", "throughput", "goodput"],
    "cluster": ["broker", "masters", "runs"],
    "cancel": ["jobs", "concurrency", "budget_ms", "bare_wait_us", "sleep_for_us", "asio_timer_us", "early", "not_measured"],
}
RUN_KEYS = ["policy", "load", "offered_rps", "goodput_rps", "goodput_ratio", "wasted_work_ratio", "p99_ms"]
LATENCY_KEYS = ["p50", "p90", "p99", "p999", "max"]


def fail(msg):
    print("check_json: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--" or sys.argv[1] not in KEYS:
        fail(__doc__)
    kind, cmd = sys.argv[1], sys.argv[3:]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=120)
    sys.stdout.write(proc.stdout)
    if proc.returncode != 0:
        fail("exit status %d" % proc.returncode)
    lines = proc.stdout.rstrip("\n").split("\n")
    try:
        doc = json.loads(lines[-1])
    except (ValueError, IndexError) as e:
        fail("last line is not JSON: %s" % e)
    if not isinstance(doc, dict):
        fail("last line is not a JSON object")
    missing = [k for k in KEYS[kind] if k not in doc]
    if missing:
        fail("missing keys: %s" % missing)
    if kind == "throughput":
        for k in KEYS[kind]:
            if not (isinstance(doc[k], (int, float)) and doc[k] > 0):
                fail("%s is not a positive number: %r" % (k, doc[k]))
    if kind == "fleet":
        if not doc["throughput"] or not doc["goodput"]:
            fail("no throughput or goodput runs")
        for t in doc["throughput"]:
            for k in ("raw_jobs_per_s", "hourglass_jobs_per_s", "enqueue_jobs_per_s", "bulk_jobs_per_s",
                      "drain_jobs_per_s", "redis_calls_per_job", "redis_cpu_us_per_job", "latency_p50_ms"):
                if not (isinstance(t.get(k), (int, float)) and t[k] > 0):
                    fail("throughput %s is not a positive number: %r" % (k, t.get(k)))
            if not t["latency_p99_ms"] >= t["latency_p50_ms"]:
                fail("throughput latency p99 below p50: %r" % t)
        if sorted({g["consumer"] for g in doc["goodput"]}) != ["hourglass", "naive"]:
            fail("goodput must compare hourglass and naive")
        for g in doc["goodput"]:
            if g["ran_in_time"] + g["ran_too_late"] != g["ran"]:
                fail("ran != in time + too late: %r" % g)
    if kind == "cluster":
        if not doc["runs"] or doc["masters"] < 1:
            fail("no runs or no masters")
        for run in doc["runs"]:
            places = run["queues"] * run["shards"]  # each queue's shards land on masters
            if not run["jobs_per_s"] > 0 or run["masters_used"] > places:
                fail("a run without jobs or with more masters than queues' shards: %r" % run)
            if len(run["nodes"]) != doc["masters"]:
                fail("a run must report every master: %r" % run)
            if sum(n["queues"] for n in run["nodes"]) != places:
                fail("the nodes' queues do not add up: %r" % run)
            for n in run["nodes"]:
                if n["queues"] > 0 and not (n["commands_per_s"] > 0 and n["cpu_us_per_job"] > 0):
                    fail("a master with queues shows no work: %r" % n)
    if kind == "overload":
        if not (doc["capacity_rps"] > 0):
            fail("capacity_rps is not positive")
        if not doc["runs"]:
            fail("no runs")
        for run in doc["runs"]:
            missing = [k for k in RUN_KEYS if k not in run]
            if missing:
                fail("a run misses keys: %s" % missing)
            if run["policy"] not in ("hourglass", "fifo", "asio"):
                fail("unknown policy %r" % run["policy"])
            if not 0 <= run["wasted_work_ratio"] <= 1:
                fail("wasted_work_ratio out of [0, 1]: %r" % run["wasted_work_ratio"])
        if "repeat" in doc:  # --repeat N: every run of every repetition, and a summary
            pairs = {(r["policy"], r["load"]) for r in doc["runs"]}
            if len(doc["runs"]) != doc["repeat"] * len(pairs):
                fail("%d runs for %d repetitions of %d (policy, load)" % (len(doc["runs"]), doc["repeat"], len(pairs)))
            if {(s["policy"], s["load"]) for s in doc["summary"]} != pairs:
                fail("the summary does not cover each (policy, load) once")
            for s in doc["summary"]:
                g = s["goodput_ratio"]
                mine = sorted(r["goodput_ratio"] for r in doc["runs"] if (r["policy"], r["load"]) == (s["policy"], s["load"]))
                if s["runs"] != doc["repeat"] or abs(g["min"] - mine[0]) > 1e-4 or abs(g["max"] - mine[-1]) > 1e-4:
                    fail("summary %r does not match its runs %r" % (s, mine))
                if not g["min"] <= g["median"] <= g["max"]:
                    fail("median outside min-max: %r" % s)
    if kind == "http":
        for key in ("latency_ms", "expired_past_budget_ms"):
            missing = [k for k in LATENCY_KEYS if k not in doc.get(key, {})]
            if missing:
                fail("%s misses keys: %s" % (key, missing))
    if kind == "cancel":
        for key in ("bare_wait_us", "sleep_for_us", "asio_timer_us"):
            missing = [k for k in LATENCY_KEYS if k not in doc[key]]
            if missing:
                fail("%s misses keys: %s" % (key, missing))
            # Every wait ends by its deadline's timer: past it, and not absurdly.
            if not 0 <= doc[key]["p50"] <= doc[key]["max"]:
                fail("%s quantiles out of order: %r" % (key, doc[key]))
        if doc["early"] != 0:
            fail("%d waits ended before their deadline" % doc["early"])
        if doc["not_measured"] >= 2 * doc["jobs"]:  # jobs per kind of wait, two kinds
            fail("no job was measured")
    print("check_json: %s JSON ok" % kind)


if __name__ == "__main__":
    main()
