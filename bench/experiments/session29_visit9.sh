export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 120 build/exp/imp_gpu_tests_ov --gtest_filter='*GatedDeltaNet*:*Golden*' > $OUT/tests_ov.txt 2>&1; echo "tests ov rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_ov.txt | head -8; grep "gdn prefill" $OUT/tests_ov.txt | awk '{for(i=1;i<=NF;i++){if($i=="y")y=$(i+1); if($i=="state")s=$(i+1)}; if(y>my)my=y; if(s>ms)ms=s} END{print "max y",my,"max state",ms}'
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_ov --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes' > $OUT/memcheck_ov.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/memcheck_ov.txt
cfg=bench/configs/qwen3.8-flash-next.json
for order in "base5 ov" "ov base5" "base5 ov"; do for v in $order; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done; done
