#!/usr/bin/env python3
"""Critical-path figures of graph-replayed decode steps from a kernel_timeline.cpp CSV.

A step starts at each graph-replayed kernel whose name contains --step-start (default embed_streams). For every
kernel its "share" is end - max(start, previous kernel's end): the time the step's chain advances while it runs
(kernels run one after another, each waiting on the previous one under PDL, so shares add up to the step time).
"gap" is start - previous end (negative: launched early under PDL). Prints the per-kernel-name totals per step,
largest first, from the median step of the last --steps.
With --prefill the kernels launched outside graphs are read instead (a prompt's chunks: use --steps 1 and a
bench with --runs 2 or more, so the last complete run lies between two embed_streams launches).
With --segments the median step is also cut at each hyper-connection read (hc_read_down) into half-layers, named
by what they run (gdn, attention, moe, other), and each kind's mean critical-path time is listed per kernel in order.
Usage: timeline_summary.py timeline.csv [--steps 8] [--step-start embed_streams] [--prefill] [--segments]
"""
import argparse
import csv
import re
import statistics
import subprocess
from collections import defaultdict


def short_name(mangled, cache={}):
    if mangled not in cache:
        try:
            text = subprocess.run(["c++filt", mangled], capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            text = mangled
        text = re.sub(r"\(.*$", "", text.replace("(anonymous namespace)::", ""))  # drop the parameter list
        text = re.sub(r"^.*::", "", text.split("<")[0]) if "<" in text else text.split("::")[-1]
        cache[mangled] = text
    return cache[mangled]


def segment_kind(names):
    for marker, kind in (("gdn_in_proj", "gdn"), ("attention_decode_partial", "attention"), ("moe_decode_gate_up", "moe")):
        if any(marker in n for n in names):
            return kind
    return "other"


def print_segments(step):
    """Half-layers of one step: each starts at a read-down; a kernel's share is end - max(start, previous end)."""
    segments, prev_end = [], step[0][0]
    for start, end, name, _, _ in step:
        if "hc_read_down" in name or not segments:
            segments.append([])
        segments[-1].append((name, max(0, end - max(start, prev_end))))
        prev_end = max(prev_end, end)
    by_kind = defaultdict(list)
    for seg in segments:
        by_kind[segment_kind([n for n, _ in seg])].append(seg)
    print("\nhalf-layers of the median step (from each hyper-connection read; mean critical-path us per kernel):")
    for kind, segs in sorted(by_kind.items(), key=lambda kv: -sum(sum(t for _, t in s) for s in kv[1])):
        order, total = [], defaultdict(float)
        for seg in segs:
            for name, t in seg:
                if name not in total:
                    order.append(name)
                total[name] += t
        mean = sum(total.values()) / len(segs) / 1e3
        parts = ", ".join(f"{n} {total[n] / len(segs) / 1e3:.1f}" for n in order)
        print(f"  {kind:9s} x{len(segs):3d}: {mean:6.1f} us = {parts}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--step-start", default="embed_streams")
    ap.add_argument("--detail", type=int, default=0, help="also list the median step's first N kernels")
    ap.add_argument("--prefill", action="store_true", help="kernels outside graphs (prefill runs) instead")
    ap.add_argument("--segments", action="store_true", help="also the median step's half-layers, by kind")
    args = ap.parse_args()
    rows = []
    with open(args.csv) as f:
        for r in csv.DictReader(f):
            if (r["graph_id"] == "0") != args.prefill:
                continue
            rows.append((int(r["start_ns"]), int(r["end_ns"]), short_name(r["name"]), int(r["grid"]), int(r["block"])))
    rows.sort()
    starts = [i for i, r in enumerate(rows) if args.step_start in r[2]]
    steps = [rows[a:b] for a, b in zip(starts, starts[1:])][-args.steps:]
    if not steps:
        raise SystemExit("no complete steps found")
    per_step = []
    for step in steps:
        totals = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # count, share, duration, gap
        prev_end = step[0][0]
        for start, end, name, _, _ in step:
            t = totals[name]
            t[0] += 1
            t[1] += max(0, end - max(start, prev_end))
            t[2] += end - start
            t[3] += start - prev_end
            prev_end = max(prev_end, end)
        per_step.append((step[-1][1] - step[0][0], totals, step))
    per_step.sort(key=lambda s: s[0])
    span, totals, median_step = per_step[len(per_step) // 2]
    spans = [s[0] / 1e3 for s in per_step]
    print(f"steps {len(per_step)}: median {statistics.median(spans):.1f} us (min {min(spans):.1f}, max {max(spans):.1f});"
          f" kernels per step {sum(t[0] for t in totals.values())}")
    print(f"{'kernel':44s} {'n':>4s} {'share us':>9s} {'%':>5s} {'dur us':>8s} {'mean dur':>8s} {'mean gap':>8s}")
    for name, (n, share, dur, gap) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{name[:44]:44s} {n:4d} {share / 1e3:9.1f} {100 * share / span:5.1f} {dur / 1e3:8.1f} "
              f"{dur / n / 1e3:8.2f} {gap / n / 1e3:8.2f}")
    if args.segments:
        print_segments(median_step)
    if args.detail:
        print(f"\nfirst {args.detail} kernels of the median step (us from the step start):")
        t0, prev_end = median_step[0][0], median_step[0][0]
        for start, end, name, grid, block in median_step[: args.detail]:
            print(f"  {(start - t0) / 1e3:8.2f} {(end - t0) / 1e3:8.2f}  dur {(end - start) / 1e3:6.2f}"
                  f"  gap {(start - prev_end) / 1e3:6.2f}  {grid:6d}x{block:<4d} {name}")
            prev_end = max(prev_end, end)


if __name__ == "__main__":
    main()
