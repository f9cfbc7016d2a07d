#!/usr/bin/env python3
# Emulates the GDN scan's pair-word layouts (bench/experiments/gdn_scan_pair_words.patch) against the fp32 layouts they
# replace: every lane's A and B fragments of V' = U - W S and of the state update hold the same value pairs.
import random
dk, NC, kC = 128, 64, 64
ls_new, lw_new, lk_new = NC + 4, dk // 2 + 4, dk + 4
S = [[random.random() for _ in range(NC)] for _ in range(dk)]     # state slice [dk][NC]
V = [[random.random() for _ in range(NC)] for _ in range(kC)]     # V' [64][NC]
W = [[random.random() for _ in range(dk)] for _ in range(kC)]     # W [64][dk]
Kp = [[random.random() for _ in range(dk)] for _ in range(kC)]    # Kp [64][dk]

def acc_row(g, e): return g + 8 * (e >> 1)
def acc_col(t, e): return 2 * t + (e & 1)

def store_tile_row_pairs(T, dst, ld, r0, n0):
    # T: full matrix; the tile rows r0..r0+15, cols n0..n0+7; each lane's v[e] = T[r0+acc_row][n0+acc_col]
    vals = {}
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        vals[lane] = [T[r0 + acc_row(g, e)][n0 + acc_col(t, e)] for e in range(4)]
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        odd = g & 1
        v = vals[lane]; pv = vals[lane ^ 4]
        got0 = pv[0] if (g ^ 1) & 1 else pv[2]   # partner sends odd ? v0 : v2 (partner's parity)
        got1 = pv[1] if (g ^ 1) & 1 else pv[3]
        row = (r0 // 2 + (g >> 1) + (4 if odd else 0))
        p0 = (got0, v[2]) if odd else (v[0], got0)
        p1 = (got1, v[3]) if odd else (v[1], got1)
        dst[(row, n0 + 2 * t)] = p0
        dst[(row, n0 + 2 * t + 1)] = p1

# S as pair words down columns
Ss = {}
for mv in range(4):
    for q in range(2):
        r0 = 16 * (mv + 4 * q)
        for nc in range(4):
            for j in range(2):
                store_tile_row_pairs(S, Ss, ls_new, r0, 16 * nc + 8 * j)
assert len(Ss) == (dk // 2) * NC
for (p, n), (x, y) in Ss.items(): assert (x, y) == (S[2 * p][n], S[2 * p + 1][n]), (p, n)
Vs = {}
for mv in range(4):
    for nc in range(4):
        for j in range(2):
            store_tile_row_pairs(V, Vs, ls_new, 16 * mv, 16 * nc + 8 * j)
for (p, n), (x, y) in Vs.items(): assert (x, y) == (V[2 * p][n], V[2 * p + 1][n])
# W record: pairs along rows; Kp record: pairs down columns
Wrec = {(i, c // 2): (-W[i][c], -W[i][c + 1]) for i in range(kC) for c in range(0, dk, 2)}
Kprec = {(p, d): (Kp[2 * p][d], Kp[2 * p + 1][d]) for p in range(kC // 2) for d in range(dk)}
# fragments: old vs new, every lane
for lane in range(32):
    g, t = lane >> 2, lane & 3
    for mv in range(4):
        for k0 in range(0, dk, 16):
            old = [(-W[16*mv+r][k0+c], -W[16*mv+r][k0+c+1]) for (r, c) in [(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]]
            new = [Wrec[(16*mv+r, (k0+c)//2)] for (r, c) in [(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]]
            assert old == new
            for nc0 in (0, 16, 32, 48):
                for j in range(2):
                    oldb = [(S[k0+kx][nc0+8*j+nx], S[k0+kx+1][nc0+8*j+nx]) for (kx, nx) in [(2*t, g), (2*t+8, g)]]
                    newb = [Ss[((k0+kx)//2, nc0+8*j+nx)] for (kx, nx) in [(2*t, g), (2*t+8, g)]]
                    assert oldb == newb
        for k0 in range(0, kC, 16):
            for q in range(2):
                r0 = 16 * (mv + 4 * q)
                olda = [(Kp[k0+kx][r0+r], Kp[k0+kx+1][r0+r]) for (r, kx) in [(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]]
                newa = [Kprec[((k0+kx)//2, r0+r)] for (r, kx) in [(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]]
                assert olda == newa
            for nc0 in (0, 16, 32, 48):
                for j in range(2):
                    oldb = [(V[k0+kx][nc0+8*j+nx], V[k0+kx+1][nc0+8*j+nx]) for (kx, nx) in [(2*t, g), (2*t+8, g)]]
                    newb = [Vs[((k0+kx)//2, nc0+8*j+nx)] for (kx, nx) in [(2*t, g), (2*t+8, g)]]
                    assert oldb == newb
print("all fragments match")

# The output kernel's operands (bench/experiments/gdn_out_pair_words.patch, on top of the scan's): Qg and Aqk as pair
# words along rows (prep), the state snapshot as pair words down columns (scan, store_tile_row_pairs into [dk/2][dv]),
# V' as hi / lo planes over U's rows 2p / 2p + 1 (scan, tile_row_pairs).
dv = 128
Sfull = [[random.random() for _ in range(dv)] for _ in range(dk)]
Vfull = [[random.random() for _ in range(dv)] for _ in range(kC)]
Qg = [[random.random() for _ in range(dk)] for _ in range(kC)]
Aqk = [[random.random() for _ in range(kC)] for _ in range(kC)]
snap = {}
for col0 in (0, 64):
    for mv in range(4):
        for q in range(2):
            for nc in range(4):
                for j in range(2):
                    tile = {}
                    store_tile_row_pairs(Sfull, tile, dv, 16 * (mv + 4 * q), col0 + 16 * nc + 8 * j)
                    snap.update(tile)
planes = {}  # (row, col) -> ('hi' or 'lo', pair)
for col0 in (0, 64):
    for mv in range(4):
        for nc in range(4):
            for j in range(2):
                tile = {}
                store_tile_row_pairs(Vfull, tile, dv, 16 * mv, col0 + 16 * nc + 8 * j)
                for (p, n), w in tile.items():
                    assert (2 * p, n) not in planes and (2 * p + 1, n) not in planes
                    planes[(2 * p, n)] = ('hi', w)
                    planes[(2 * p + 1, n)] = ('lo', w)
assert len(planes) == kC * dv
Qrec = {(i, c // 2): (Qg[i][c], Qg[i][c + 1]) for i in range(kC) for c in range(0, dk, 2)}
Arec = {(i, c // 2): (Aqk[i][c], Aqk[i][c + 1]) for i in range(kC) for c in range(0, kC, 2)}
for lane in range(32):
    g, t = lane >> 2, lane & 3
    for mt in range(4):
        for k0 in range(0, dk, 16):
            rc = [(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]
            assert [Qrec[(16*mt+r, (k0+c)//2)] for r, c in rc] == [(Qg[16*mt+r][k0+c], Qg[16*mt+r][k0+c+1]) for r, c in rc]
            for n0 in range(0, dv, 8):
                kn = [(2*t, g), (2*t+8, g)]
                assert [snap[((k0+kx)//2, n0+nx)] for kx, nx in kn] == [(Sfull[k0+kx][n0+nx], Sfull[k0+kx+1][n0+nx]) for kx, nx in kn]
        for k0 in range(0, 16 * mt + 16, 16):
            rc = [(g, 2*t), (g+8, 2*t), (g, 2*t+8), (g+8, 2*t+8)]
            assert [Arec[(16*mt+r, (k0+c)//2)] for r, c in rc] == [(Aqk[16*mt+r][k0+c], Aqk[16*mt+r][k0+c+1]) for r, c in rc]
            for n0 in range(0, dv, 8):
                for kx, nx in [(2*t, g), (2*t+8, g)]:
                    hi, lo = planes[(k0+kx, n0+nx)], planes[(k0+kx+1, n0+nx)]
                    assert hi[0] == 'hi' and lo[0] == 'lo' and hi[1] == lo[1] == (Vfull[k0+kx][n0+nx], Vfull[k0+kx+1][n0+nx])
print("output kernel fragments match")
