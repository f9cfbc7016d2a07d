#!/usr/bin/env python3
# Per-kernel totals from an `ncu --print-summary per-kernel` log (scripts/gpu_profile.sh): time x invocations,
# sorted, with the grid. Usage: scripts/ncu_summary.py ncu_decode.txt [rows]
import re,sys
lines=open(sys.argv[1]).read().splitlines()
rows=[];cur=None
for l in lines:
    m=re.match(r'\s+(?:.*::)?([A-Za-z_0-9]+)(?:<.*>)?(?:\(.*\))? \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\).*Invocations (\d+)',l)
    if m: cur=(m.group(1),f"grid{m.group(2)}x{m.group(3)}x{m.group(4)} blk{m.group(5)}",int(m.group(8)));continue
    m=re.match(r'\s+gpu__time_duration.sum\s+(\w+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)',l)
    if m and cur:
        u=m.group(1); f={'us':1,'ms':1000,'ns':1e-3,'s':1e6}[u]
        avg=float(m.group(4).replace(',',''))*f
        rows.append((avg*cur[2],cur[0],cur[1],cur[2],avg));cur=None
rows.sort(reverse=True);tot=sum(r[0] for r in rows)
for r in rows[:int(sys.argv[2]) if len(sys.argv)>2 else 60]: print(f"{r[0]:10.1f}us {100*r[0]/tot:5.1f}% n={r[3]:5d} avg={r[4]:9.1f}us {r[1]} {r[2]}")
print("total",round(tot,1),"launches",sum(r[3] for r in rows))
