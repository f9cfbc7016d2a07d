# Host emulation of session23_block_router.patch (block_router in moe_router.cuh): the two bounded rounds against
# the reference order (larger logit first, ties to the lower expert id) on random, tied and all-equal rows.
# Run: python3 bench/experiments/session23_block_router_emulation.py
import random
def block_router(logits, k, W=8):
    E=len(logits)
    key=lambda e:(logits[e], -e)  # larger logit, then lower id
    NONE=None
    slots=[]
    for w in range(W):
        lanes=[]
        for l in range(32):
            ks=[key(e) for e in (64*w+l, 64*w+32+l) if e<E]
            lanes.append(ks)
        maxima=[max(ks) if ks else None for ks in lanes]
        nz=[m for m in maxima if m is not None]
        # rank: count of maxima greater
        tau=None
        for m in maxima:
            if m is None: continue
            r=sum(1 for o in nz if o>m)
            if r==k-1: tau=m
        cand=[x for ks in lanes for x in ks if tau is None or x>=tau]
        # order within warp: lane order for c0 then c1
        c0=[ks[0] for ks in lanes if ks and (tau is None or ks[0]>=tau)]
        c1=[ks[1] for ks in lanes if len(ks)>1 and (tau is None or ks[1]>=tau)]
        mine=c0+c1
        assert len(mine)<=32, len(mine)
        slots.append(mine+[None]*(32-len(mine)))
    flat=[x for s in slots for x in s]  # slot index w*32+pos
    lanes2=[[flat[l+32*j] for j in range(8) if flat[l+32*j] is not None] for l in range(32)]
    max2=[max(ks) if ks else None for ks in lanes2]
    nz2=[m for m in max2 if m is not None]
    tau2=None
    for m in max2:
        if m is None: continue
        if sum(1 for o in nz2 if o>m)==k-1: tau2=m
    assert tau2 is not None
    cand=[x for ks in lanes2 for x in ks if x>=tau2]
    assert len(cand)<=16*8
    top=[None]*k
    for x in cand:
        a=sum(1 for o in cand if o>x)
        if a<k: top[a]=x
    return [-t[1] for t in top]
random.seed(1)
for it in range(3000):
    E=random.randint(129,512); k=random.randint(1,16)
    mode=random.random()
    if mode<0.3: logits=[random.choice([0.0,1.0,2.0,-1.0]) for _ in range(E)]
    elif mode<0.5: logits=[0.5]*E
    else: logits=[random.gauss(0,1) for _ in range(E)]
    ref=sorted(range(E), key=lambda e:(-logits[e], e))[:k]
    got=block_router(logits,k)
    assert got==ref, (E,k,got,ref)
print("ok")
