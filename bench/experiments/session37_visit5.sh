#!/usr/bin/env bash
# Session 37, fifth visit: the selection cluster alone on its SMs. Visits 1 and 4: whenever the score kernel ended
# earlier (64/32-thread blocks, the reduce-scatter scores), the selection after it took longer (its passes ran beside
# the main in-projection GEMV instead of after it) and decode at 32K lost. sx = session37_qsa_select_whole_sm.patch
# (sb4 + the cluster kernel asking for all the shared memory a block may have, so no GEMV block shares its SMs);
# bfsx = the same with the reduce-scatter scores. A/B against s36 and sb4, 1K / 32K, two rounds; GpuQsa of both;
# a 32K timeline of bfsx.
# Run: `tar -xJf build/carry.tar.xz && timeout 330 bash bench/experiments/session37_visit5.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
OUT=$OUT/ab VARIANTS="s36 sb4 sx bfsx" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
for v in sx bfsx; do
  timeout 40 build/exp/imp_gpu_tests_$v --gtest_filter='GpuQsa.*' > $R/tests_$v.txt 2>&1
  echo "GpuQsa $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_$v.txt | head -4
done
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 45 build/exp/imp_bfsx bench --dummy $cfg --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$R/tl_bfsx_32768.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_bfsx_32768.txt" 2>&1; rm -f "$OUT/tl.csv"
echo "== timeline bfsx 32768"; head -1 "$R/tl_bfsx_32768.txt"; grep -E "^  attention" "$R/tl_bfsx_32768.txt"
sed -n '/first 150/,$p' "$R/tl_bfsx_32768.txt" | grep -B4 -A6 -m1 qsa_prep_score
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
