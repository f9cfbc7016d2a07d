#!/usr/bin/env bash
# Session 37, fourth visit: bf = session37_qsa_decode_score_reduce_scatter.patch (the decode score kernel's dots
# summed by one reduce-scatter per batch of 32 instead of 32 warp sums; visit 3's stamps: the first batch of scores
# took ~4.7 us after the norms at 32K) against s36 (= 3ba2459) and sb4, 1K / 32K, two rounds; bf's whole GPU suite,
# memcheck of its QSA decode and golden ple_qsa tests, and a 32K timeline.
# Run: `tar -xJf build/carry.tar.xz && timeout 590 bash bench/experiments/session37_visit4.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
OUT=$OUT/ab VARIANTS="s36 sb4 bf" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
timeout 180 build/exp/imp_gpu_tests_bf > $R/gpu_tests_bf.log 2>&1; echo "gpu tests bf rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests_bf.log | tail -12
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_bf \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:GpuQsa.SelectionMatchesCpuWithEightIndexHeads:*Golden*/ple_qsa' \
  > $R/memcheck_bf.log 2>&1; echo "memcheck bf rc=$?"; tail -1 $R/memcheck_bf.log
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 60 build/exp/imp_bf bench --dummy $cfg --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$R/tl_bf_32768.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_bf_32768.txt" 2>&1; rm -f "$OUT/tl.csv"
echo "== timeline bf 32768"; head -1 "$R/tl_bf_32768.txt"; grep -E "^  attention" "$R/tl_bf_32768.txt"
sed -n '/first 150/,$p' "$R/tl_bf_32768.txt" | grep -B4 -A6 -m1 qsa_prep_score
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
