#!/usr/bin/env python3
"""Summarize an Nsight Compute source page (`ncu -i REPORT --page source --csv --print-source sass`): the share of
each stall reason over all warp samples, then the instructions holding the most samples with their top reasons.
Usage: bench/tools/ncu_sass_top.py SASS.csv [COUNT]"""
import csv
import sys


def main() -> None:
    path = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    rows = list(csv.reader(open(path)))
    header_at = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    header = rows[header_at]
    col = {name: i for i, name in enumerate(header)}
    data = [r for r in rows[header_at + 1:] if len(r) == len(header)]
    samples = col["Warp Stall Sampling (All Samples)"]

    def num(r, c):
        return int(r[c] or 0)

    total = sum(num(r, samples) for r in data)
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    print(f"{path}: {total} warp samples over {len(data)} instructions")
    shares = sorted(((sum(num(r, col[k]) for r in data), k[6:]) for k in reasons), reverse=True)
    print("by reason: " + ", ".join(f"{k} {v * 100 / total:.1f}%" for v, k in shares if v))
    top = sorted(range(len(data)), key=lambda i: -num(data[i], samples))[:count]
    print(f"the {count} instructions with the most samples, in program order (index, share, SASS, top reasons):")
    for i in sorted(top):
        r = data[i]
        why = sorted(((num(r, col[k]), k[6:]) for k in reasons), reverse=True)[:3]
        print(f"{i:5d} {num(r, samples) * 100 / total:5.2f}% {r[col['Source']].strip()[:64]:64s} "
              + " ".join(f"{k}:{v}" for v, k in why if v))


if __name__ == "__main__":
    main()
