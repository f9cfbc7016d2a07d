# Session 27: checks the slot arithmetic of session27_qsa_select_one_exchange.patch (the cluster QSA selection's
# output slots from one packed scan and one exchange of the ranks' tie and above counts) against the two-scan
# order it replaces: every (rank, thread)'s slot and kept ties, random counts and quotas (20000 trials).
import random
random.seed(3)
for trial in range(20000):
    R=8; T=random.choice([1,2,3,8])
    ties=[[random.choice([0,0,1,2,5]) for _ in range(T)] for _ in range(R)]
    above=[[random.choice([0,1,3]) for _ in range(T)] for _ in range(R)]
    quota=random.randint(0, sum(map(sum,ties))+2)
    # reference: sequential in (rank, thread) order
    ref_slot={}; used=0; slot=0
    for r in range(R):
        for t in range(T):
            a=max(0,min(ties[r][t], quota-used)); used+=ties[r][t]
            ref_slot[(r,t)]=(slot,a); slot+=above[r][t]+a
    ref_total=slot
    for rank in range(R):
        running=0; tbr=0; kbr=0; ktot=0
        for r in range(R):
            kept=sum(above[r])+max(0,min(sum(ties[r]),quota-running))
            if r==rank: tbr=running
            if r<rank: kbr+=kept
            ktot+=kept; running+=sum(ties[r])
        assert ktot==ref_total
        qh=max(0,quota-tbr)
        for t in range(T):
            tib=sum(ties[rank][:t]); aib=sum(above[rank][:t])
            allowed=max(0,min(ties[rank][t], qh-tib))
            s=kbr+aib+min(qh,tib)
            assert (s,allowed)==ref_slot[(rank,t)], (trial,rank,t)
print("ok")
