#!/usr/bin/env bash
# Session 33, visit 2: the MoE phase probe (per-step medians by gate/up blocks per SM) on the tree and with
# session33_gate_up_copies_before_x.patch (gux), its MoE tests, then A/B of the tree against four small variants:
# zs1 (the GDN gate GEMV one warp per row), outs4 (output projections split K over 4 warps), s4096 (split K = 2
# only below 4096 rows), gux; tg 128 at 1K / 32K, two alternated rounds.
# Carry build/carry.tar.xz (build/exp/imp_{base,zs1,outs4,s4096,gux}, imp_gpu_tests_gux, build/probes/moe_phase{,_gux},
# build/cuda/bin/lib).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for p in moe_phase moe_phase_gux moe_phase moe_phase_gux; do
  echo "== $p"; timeout 60 build/probes/$p 2>&1 | tee -a $R/$p.txt | grep -E "layers|blocks on|step 1|step 2|step 5"
done
timeout 120 build/exp/imp_gpu_tests_gux --gtest_filter='*Moe*:GpuKernels.Expert*:*Golden*/nvfp4:*Golden*/many_experts' > $R/tests_gux.txt 2>&1
echo "tests gux rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_gux.txt | head
cfg=bench/configs/qwen3.8-flash-next.json
for i in 1 2; do for v in base zs1 outs4 s4096 gux; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 100 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 1 --tg 128 --context 1024,32768 --runs 5 --out $R/${v}_$i.json > /dev/null 2> $R/${v}_$i.log
  echo "$v$i rc=$?: $(grep -E 'tg ' $R/${v}_$i.log | cut -c12-90 | tr '\n' ' ')"
done; done
tar -czf $OUT/visit2.tar.gz -C $R . && rm -rf $R
