#!/usr/bin/env bash
# Session 34, visit 2: the GDN output gate's z rows split between the in-projection and the gate branch, and the gate
# branch joined through a programmatic event.
# - z1 / z2 / z4 (session34_gdn_z_front.patch with kGdnZFrontEighths = 1 / 2 / 4): the decode in-projection also computes the first 1/8, 2/8 or
#   4/8 of the z rows as act(z) (768 / 1536 / 3072 of 6144 rows, 3.9 / 7.9 / 15.7 MB at the released shape), the
#   low-priority gate GEMV the rest. The 32K timeline at 8ee265c has the gate GEMV ending 11.1 us after in_proj and
#   ~4.5 us after the recurrent step (session 14): the branch is the critical path, and moving rows to the main
#   chain shortens it at ~1/4 us per MB.
# - pj (session34_gate_join_programmatic_event.patch, session 14's patch ported): the join recorded as a
#   programmatic event, so the output projection launches early under PDL again. Session 14: -0.14%, because the
#   gate ended after the recurrent step; with z2 it may not.
# - z2pj: both.
# - agl (session34_attention_gate_after_in_proj.patch): the attention layers' gate halves forked after the rest of the
#   in-projection instead of before it, so that they run beside the latency-bound prep / QSA / attention only.
# - z2pjs: z2pj + session34_moe_shared_rows_on_gate_branch.patch: the MoE input GEMV's shared-expert rows (6.6 MB of
#   9.2) on the gate branch (joined programmatically before down, whose shared warps now wait before reading them),
#   the router's rows alone on the chain to the routing.
# base = c34c014. Tests of z2pjs (the z split, the programmatic join's own test, the MoE, golden) and memcheck, then
# the A/B/...
# (tg 128 at 1K / 32K, two rounds).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 150 build/exp/imp_gpu_tests_z2pjs --gtest_filter='GpuDecodeFused.*:GpuMoeDecodeFused.*:GpuPdlEvent.*:GpuGatedDeltaNet.*:*Golden*' > $R/tests_z2pjs.txt 2>&1
echo "tests z2pjs rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|pdl-event" $R/tests_z2pjs.txt | head
timeout 60 build/exp/imp_gpu_tests_agl --gtest_filter='*Golden*' > $R/tests_agl.txt 2>&1
echo "tests agl rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_agl.txt | head -3
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_z2pjs \
  --gtest_filter='GpuDecodeFused.*:GpuMoeDecodeFused.*:GpuPdlEvent.*:*Golden*/ple_qsa' > $R/memcheck_z2pjs.txt 2>&1; echo "memcheck z2pjs rc=$?"; tail -1 $R/memcheck_z2pjs.txt
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base34 z1 z2 z4 pj z2pj z2pjs agl" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
# Decode timelines at 1K of base34 and z2pjs (the GDN half-layer's segments).
for v in base34 z2pjs; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 100 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context 1024 --runs 1 --out "$OUT/tl_$v.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 > "$OUT/tl_$v.txt" 2>&1; rm -f "$OUT/tl.csv"
  echo "== $v"; head -1 "$OUT/tl_$v.txt"; grep -A4 "^half-layers" "$OUT/tl_$v.txt"
done
