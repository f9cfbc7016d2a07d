# Session 31, visit 2: the MoE gate/up epilogue by one bulk store per warpgroup (bst) and, on top of it, warpgroup
# 1 started 2 / 4 / 6 chunks after warpgroup 0 (skew2/4/6): MoE prefill and golden tests, memcheck and racecheck of
# bst, pp 4096 A/B against main2 (42ad0f1) in two orders, Nsight Compute of bst's gate/up on the 4-layer slice.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
o=$OUT/v2; mkdir -p $o
timeout 90 build/exp/imp_gpu_tests_bst --gtest_filter='*MoePrefill*:*Golden*' > $o/tests_bst.txt 2>&1; echo "bst tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda.*(nvfp4|long_sparse)" $o/tests_bst.txt | head -8
for v in skew2 skew4 skew6; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='*MoePrefill*:*Golden*:-*RealisticLoad*' > $o/tests_$v.txt 2>&1; echo "$v tests rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED" $o/tests_$v.txt | head -4
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_bst --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > $o/memcheck_bst.txt 2>&1; echo "memcheck bst rc=$?"; tail -1 $o/memcheck_bst.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 build/exp/imp_gpu_tests_skew4 --gtest_filter='*MoePrefill*Tiny*' > $o/racecheck_skew4.txt 2>&1; echo "racecheck skew4 rc=$?"; tail -1 $o/racecheck_skew4.txt
cfg=bench/configs/qwen3.8-flash-next.json
for order in "main2 bst skew2 skew4 skew6" "skew6 skew4 skew2 bst main2"; do for v in $order; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $o/$v.json > /dev/null 2> $o/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $o/$v.log | cut -c12-80)"
done; done
k=moe_gate_up_kernel
timeout 120 ncu -k regex:$k -s 2 -c 1 --import-source no --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters --section Occupancy --export $o/gu_bst build/exp/imp_bst bench --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 > $o/ncu_run.txt 2>&1
echo "ncu rc=$?"
timeout 60 ncu --import $o/gu_bst.ncu-rep --print-details all > $o/ncu_bst_details.txt 2>&1
timeout 60 ncu --import $o/gu_bst.ncu-rep --page source --csv --print-source sass > $o/ncu_bst_sass.csv 2>&1
grep -E "Duration|Throughput|Issued|Eligible|Pipe|Active Warps" $o/ncu_bst_details.txt | head -20
rm -f $o/*.ncu-rep
tar -czf $OUT/v2.tar.gz -C $OUT v2 && rm -rf $o
