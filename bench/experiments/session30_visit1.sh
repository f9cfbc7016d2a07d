# Session 30, visit 1: the fused hyper-connection up projection + mix (prefill): its tests, the golden fixtures
# (S 4, d 64, rank 16 take it), all GPU tests, memcheck and racecheck of its test, pp 4096 A/B against f1a88c7,
# and a prefill timeline.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t=build/exp/imp_gpu_tests_upmix
timeout 60 $t --gtest_filter='GpuHyperConnection.*' > $OUT/tests_hc.txt 2>&1; echo "hc tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Expected|Which|max_rel" $OUT/tests_hc.txt | head -20
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='GpuHyperConnection.UpMix*' > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/memcheck.txt
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 $t --gtest_filter='GpuHyperConnection.UpMix*' > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -2 $OUT/racecheck.txt
timeout 200 $t > $OUT/tests_all.txt 2>&1; echo "all tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_all.txt | head -12; grep "golden-cuda" $OUT/tests_all.txt | head -12
cfg=bench/configs/qwen3.8-flash-next.json
for order in "base upmix" "upmix base" "base upmix"; do for v in $order; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done; done
for v in upmix; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 120 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 4096 --tg 1 --context 1 --runs 1 --out "$OUT/tl_$v.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --prefill --steps 1 --detail 90 > "$OUT/tl_$v.txt" 2>&1
  echo "== $v"; head -30 "$OUT/tl_$v.txt"; rm -f "$OUT/tl.csv"
done
