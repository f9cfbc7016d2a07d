# Session 27: checks the threshold algorithm of session27_qsa_select_register_runs.patch (radix passes that start
# at the highest bit where the largest key and the least of the runs' maxima differ) against a sort, on random
# keys with ties, zeros and mixed signs (3000 trials). Printed "ok" before the patch went to the GPU, where it
# passed the QSA tests but was not faster (bench/results/2026-12-01_session27_ab.txt, visits 5-6).
import random, struct
def okey(f):
    b = struct.unpack('<I', struct.pack('<f', f))[0]
    return (~b & 0xffffffff) if b & 0x80000000 else (b | 0x80000000)
def pick(hist, low, prefix, remaining):
    need = remaining
    for d in range(255, -1, -1):
        if hist[d] >= need:
            return prefix | (d << low), need
        need -= hist[d]
    raise Exception("not found")
def select(keys, keep, T=1024):
    blocks = len(keys); per = (blocks + T - 1)//T
    runs_list = [keys[t*per:min(blocks,(t+1)*per)] for t in range(T)]
    runs = (blocks + per - 1)//per
    lo = min((max(r) if runs >= keep else min(r)) for r in runs_list if r)
    hi = max(max(r) for r in runs_list if r)
    diff = lo ^ hi
    high = -1 if diff == 0 else diff.bit_length() - 1
    prefix = hi if high < 0 else (0 if high == 31 else hi & ~((2 << high) - 1) & 0xffffffff)
    remaining = keep
    while high >= 0:
        low = max(0, high - 7)
        above = 0 if high == 31 else (~((2 << high) - 1)) & 0xffffffff
        dm = (2 << (high - low)) - 1
        hist = [0]*256
        for k in keys:
            if (k & above) == (prefix & above): hist[(k >> low) & dm] += 1
        prefix, remaining = pick(hist, low, prefix, remaining)
        high -= 8
    return prefix, remaining
random.seed(1)
for trial in range(3000):
    blocks = random.choice([513, 600, 1000, 3000, 8224, 9001, random.randint(2, 16384)])
    keep = random.choice([512, 8, 2048, random.randint(1, blocks)])
    keep = min(keep, blocks)
    mode = random.random()
    if mode < 0.3: vals = [max(0.0, random.gauss(0, 1)) for _ in range(blocks)]
    elif mode < 0.5: vals = [random.choice([0.0, 1.0, 2.5]) for _ in range(blocks)]
    elif mode < 0.6: vals = [1.0]*blocks
    else: vals = [random.uniform(-3, 3) * 10**random.uniform(-3, 3) for _ in range(blocks)]
    vals = [struct.unpack('<f', struct.pack('<f', v))[0] for v in vals]
    keys = [okey(v) for v in vals]
    p, r = select(keys, keep)
    s = sorted(keys, reverse=True)
    thr = s[keep-1]
    above = sum(1 for k in keys if k > thr)
    assert p == thr, (trial, blocks, keep)
    assert r == keep - above, (trial, r, keep - above)
print("ok")
