# Session 31, visit 1: the five patches session 30 prepared, each as a variant on 42d13eb (rows1, fapp, gdnfs, moefd,
# sm132; the kept three are applied in 42ad0f1), plus all5, all five together: each variant's GPU tests, racecheck of the
# attention ping-pong, then pp 4096 A/B in two orders.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
declare -A filter=([rows1]='*' [fapp]='*Attention*:*Golden*:*Prefill*' [gdnfs]='*GatedDeltaNet*:*Golden*'
                   [moefd]='*MoePrefill*:*Golden*' [sm132]='GpuHyperConnection.*:*Golden*'
                   [all5]='*Golden*:GpuHyperConnection.*:*AttentionPrefill*:*GatedDeltaNetPrefill*:*MoePrefill*')
for v in rows1 fapp gdnfs moefd sm132 all5; do
  timeout 200 build/exp/imp_gpu_tests_$v --gtest_filter="${filter[$v]}" > $OUT/tests_$v.txt 2>&1; echo "$v tests rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $OUT/tests_$v.txt | head -12
done
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 build/exp/imp_gpu_tests_fapp --gtest_filter='GpuAttentionPrefill.*SmallShapes' > $OUT/racecheck_fapp.txt 2>&1; echo "racecheck fapp rc=$?"; tail -2 $OUT/racecheck_fapp.txt
cfg=bench/configs/qwen3.8-flash-next.json
for order in "main rows1 fapp gdnfs moefd sm132 all5" "all5 sm132 moefd gdnfs fapp rows1 main"; do for v in $order; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp |memory plan' $OUT/$v.log | cut -c12-120)"
done; done
