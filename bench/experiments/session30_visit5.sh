# Session 30, visit 5: full validation of f2b60f4 (scripts/gpu_visit.sh: every GPU test, the benchmark, a prefill
# timeline, memcheck incl. the fused up/mix test, generate cuda vs cpu), then pp 4096 A/B of one 8-stage A ring
# filled in turn order (session30_upmix_one_ring.patch) against f2b60f4.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
IMP_COMMIT=f2b60f4 SERVER=0 TIMELINE_PREFILL=1 \
  MEMCHECK_FILTER='*Golden*/ple_qsa:*Golden*/nvfp4:*Ngram*:GpuHyperConnection.UpMix*:GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" bash scripts/gpu_visit.sh
timeout 60 build/exp/imp_gpu_tests_v7 --gtest_filter='GpuHyperConnection.*' > $OUT/tests_v7.txt 2>&1; echo "v7 hc tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure" $OUT/tests_v7.txt | head -5
cfg=bench/configs/qwen3.8-flash-next.json
for order in "main v7" "v7 main" "main v7"; do for v in $order; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/ab_$v.json > /dev/null 2> $OUT/ab_$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/ab_$v.log | cut -c12-80)"
done; done
