#!/usr/bin/env python3
"""Runs `hourglass-bench throughput --json` several times per worker count and
prints, per baseline, the median, min and max of hourglass's ratio to it,
each ratio taken within one invocation (the baselines swing between
invocations on a shared machine; within one they share its minutes).

Usage: bench/throughput_ratios.py [--bench PATH] [--runs 5] [--workers 1,2]
"""
import argparse
import json
import statistics
import subprocess

BASELINES = ["asio", "mutex", "moodycamel", "tbb"]


def invocation(bench, workers):
    out = subprocess.run([bench, "throughput", "--workers", str(workers), "--json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/release/tools/hourglass-bench")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    print("| workers | baseline | hourglass jobs/s (median) | baseline jobs/s (median) "
          "| hourglass ÷ baseline: median (min–max) |")
    print("| --- | --- | --- | --- | --- |")
    for w in (int(x) for x in args.workers.split(",")):
        runs = [invocation(args.bench, w) for _ in range(args.runs)]
        mine = statistics.median(r["hourglass_jobs_per_s"] for r in runs)
        for b in BASELINES:
            ratios = [r["hourglass_jobs_per_s"] / r[f"{b}_jobs_per_s"] for r in runs]
            theirs = statistics.median(r[f"{b}_jobs_per_s"] for r in runs)
            print(f"| {w} | {b} | {mine / 1e6:.2f} M | {theirs / 1e6:.2f} M | "
                  f"**{statistics.median(ratios):.2f}** ({min(ratios):.2f}–{max(ratios):.2f}) |")


if __name__ == "__main__":
    main()
