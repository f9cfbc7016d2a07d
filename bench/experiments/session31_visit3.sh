# Session 31, visit 3: two variants on 1d62d7b (main3): the hc write/norm/split row kernel at three blocks per SM
# (hcw3) and the MoE gather with four items per thread in flight (gth), and both: their tests, memcheck of gth,
# pp 4096 A/B in two orders; then the full validation of main3 (scripts/gpu_visit.sh, the carried build/cuda).
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
o=$OUT/v3; mkdir -p $o
declare -A filter=([hcw3]='GpuHyperConnection.*:*Golden*' [gth]='*MoePrefill*:*Golden*' [both]='*Golden*')
for v in hcw3 gth both; do
  timeout 90 build/exp/imp_gpu_tests_$v --gtest_filter="${filter[$v]}" > $o/tests_$v.txt 2>&1; echo "$v tests rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED" $o/tests_$v.txt | head -6
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_gth --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > $o/memcheck_gth.txt 2>&1; echo "memcheck gth rc=$?"; tail -1 $o/memcheck_gth.txt
cfg=bench/configs/qwen3.8-flash-next.json
for order in "main3 hcw3 gth both" "both gth hcw3 main3"; do for v in $order; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $o/$v.json > /dev/null 2> $o/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $o/$v.log | cut -c12-80)"
done; done
tar -czf $OUT/v3.tar.gz -C $OUT v3 && rm -rf $o
IMP_COMMIT=1d62d7b SERVER=0 TIMELINE_PREFILL=1 \
  MEMCHECK_FILTER='*Golden*/ple_qsa:*Golden*/nvfp4:*Ngram*:GpuHyperConnection.UpMix*:*MoePrefill*Tiny*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" timeout 400 bash scripts/gpu_visit.sh
