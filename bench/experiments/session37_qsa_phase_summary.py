#!/usr/bin/env python3
"""Summarises the in-engine QSA phase stamps (session37_qsa_score_phase_probe.patch prints them at exit: the last
launch's, i.e. the last attention layer of the last decode step). Times in us from the score kernel's earliest
return from its PDL wait (about when the index GEMV's grid completed). Score blocks (rows 8..135): 0 entry, 1 after
the wait, 2 after the query norms (block barrier), 3 end. Selection cluster (rows 0..7): 0 entry, 1 after the wait,
2 keys in shared memory, 3..6 after each radix pass, 7 end (0 where not reached)."""
import statistics
import sys

rows = {}
for line in open(sys.argv[1]):
    if line.startswith("qsa_phase "):
        parts = line.split()
        rows[int(parts[1])] = [int(v) for v in parts[2:]]
score = [rows[r] for r in range(8, 136) if r in rows and rows[r][1] > 0]
t0 = min(s[1] for s in score)
def stats(values):
    values = [(v - t0) / 1000.0 for v in values if v > 0]
    if not values:
        return "-"
    return f"min {min(values):7.2f}  median {statistics.median(values):7.2f}  max {max(values):7.2f}  (n {len(values)})"
names = ["entry", "after wait", "after norms", "keys arrived", "first scores", "end"] if sys.argv[2:] == ["2"] else ["entry", "after wait", "after norms", "end"]
print("score kernel blocks (us from the first return from the wait):")
for i, name in enumerate(names):
    print(f"  {name:12s} {stats([s[i] for s in score])}")
print("selection cluster blocks:")
for i, name in enumerate(["entry", "after wait", "keys loaded", "pass 1", "pass 2", "pass 3", "pass 4", "end"]):
    print(f"  {name:12s} {stats([rows[r][i] for r in range(8) if r in rows])}")
