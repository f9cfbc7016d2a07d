#!/usr/bin/env bash
# Session 37, second visit (builds from 3ba2459's tree + bench commits):
# - A/B (1K / 32K, two rounds): s36 (= 3ba2459), sb4 (visit 1: +0.15% at 1K in both rounds), pf =
#   session37_qsa_block_keys_l2_prefetch.patch (each attention layer's block keys prefetched into L2 on a side
#   branch forked at the layer's start, while its read runs: tests whether the score kernel's ~10-15 us after the
#   index GEMV at 32K are its key loads queued behind the in-projection GEMVs' stream);
# - in-engine phase stamps of the score kernel and the selection (pr = session37_qsa_score_phase_probe.patch, prpf =
#   the same with pf) at 32K, summarised by session37_qsa_phase_summary.py;
# - the golden and QSA GPU tests of pf; a 32K timeline of pf.
# Run: `tar -xJf build/carry.tar.xz && timeout 590 bash bench/experiments/session37_visit2.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
OUT=$OUT/ab VARIANTS="s36 sb4 pf" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
for v in pr prpf; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 1 --tg 24 --context 32768 --runs 1 \
    --out "$R/probe_$v.json" > /dev/null 2> "$R/probe_$v.log"
  echo "== probe $v rc=$?"; python3 bench/experiments/session37_qsa_phase_summary.py "$R/probe_$v.log"
done
timeout 150 build/exp/imp_gpu_tests_pf --gtest_filter='*Golden*:GpuQsa.*:*Decode*' > $R/tests_pf.txt 2>&1
echo "tests pf rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_pf.txt | head -6
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 60 build/exp/imp_pf bench --dummy $cfg --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$R/tl_pf_32768.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_pf_32768.txt" 2>&1; rm -f "$OUT/tl.csv"
echo "== timeline pf 32768"; head -1 "$R/tl_pf_32768.txt"; grep -E "^  attention" "$R/tl_pf_32768.txt"
sed -n '/first 150/,$p' "$R/tl_pf_32768.txt" | grep -B4 -A6 -m1 qsa_prep_score
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
