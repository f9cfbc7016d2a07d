#!/usr/bin/env bash
# Session 38, visit 2: green contexts in the beyond-budget decode graph (bench/experiments/session38_green_split.patch,
# built as build/exp/imp_gc): correctness of the golden decode beyond the budget under each mode, then decode at 32K
# (and 1K for the baseline) in two rounds, medians of 5. Also agg (session38_qsa_select_warp_aggregated.patch): the
# cluster selection's counts warp-aggregated, and sel (session38_qsa_select_agg_one_exchange.patch: agg + one scan
# and one cluster exchange for the final phase): their QSA and golden tests, decode at 32K.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
CFG=bench/configs/qwen3.8-flash-next.json
declare -A ENVS=([main]="" [gcoff]="" [B8]="IMP_GC=B IMP_GC_SMS=8" [B16]="IMP_GC=B IMP_GC_SMS=16" [A16]="IMP_GC=A IMP_GC_SMS=16" [A8]="IMP_GC=A IMP_GC_SMS=8")
bin() { case $1 in main) echo build/exp/imp_main;; agg) echo build/exp/imp_agg;; sel) echo build/exp/imp_sel;; *) echo build/exp/imp_gc;; esac; }
ENVS[agg]=""; ENVS[sel]=""
for v in agg sel; do
  timeout 80 build/exp/imp_gpu_tests_$v --gtest_filter='GpuQsa*:*Golden*/long_sparse:*Golden*/ple_qsa' > $R/tests_$v.log 2>&1
  echo "$v tests rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $R/tests_$v.log | tr '\n' ' ')"
done
for m in B8 A16; do
  env ${ENVS[$m]} timeout 60 build/exp/imp_gpu_tests_gc --gtest_filter='*Golden*/long_sparse:*Golden*/ple_qsa' > $R/golden_$m.log 2>&1
  rc=$?; echo "golden $m rc=$rc: $(grep -E 'golden-cuda|green' $R/golden_$m.log | cut -c1-150 | tr '\n' ' ')"
  if [ $rc != 0 ]; then
    tail -5 $R/golden_$m.log
    ENVS[$m]="${ENVS[$m]} IMP_GC_NOPDL=1"; m2=${m/8/16}; [ "$m2" != "$m" ] || m2=${m/16/8}; ENVS[$m2]="${ENVS[$m2]} IMP_GC_NOPDL=1"
    env ${ENVS[$m]} timeout 60 build/exp/imp_gpu_tests_gc --gtest_filter='*Golden*/long_sparse:*Golden*/ple_qsa' > $R/golden_${m}_nopdl.log 2>&1
    echo "golden $m nopdl rc=$?: $(grep -E 'golden-cuda|green' $R/golden_${m}_nopdl.log | cut -c1-150 | tr '\n' ' ')"
  fi
done
for round in 1 2; do
  for v in main agg sel gcoff B8 B16 A16 A8; do
    ctx=32768; [ $v = main ] && ctx=1024,32768
    env ${ENVS[$v]} IMP_COMMIT="$v" timeout 60 $(bin $v) bench --dummy $CFG --backend cuda --pp 1 --tg 128 --context $ctx \
      --runs 5 --out "$R/bench_${v}_$round.json" > /dev/null 2> "$R/bench_${v}_$round.log"
    echo "r$round $v rc=$?: $(grep -E 'tg ' "$R/bench_${v}_$round.log" | sed 's/.*at context *//' | cut -c1-40 | tr '\n' ' ')"
  done
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
