# Session 30, visit 2: the fused up/mix kernel's variants (v1 as visit 1; v2 fast sigmoid; v3 + ping-pong of the two
# consumer warpgroups): tests of v3, pp 4096 A/B against f1a88c7 in alternated orders, Nsight Compute of v1 and v3.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in v2 v3; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='GpuHyperConnection.*' > $OUT/tests_$v.txt 2>&1; echo "$v hc tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure" $OUT/tests_$v.txt | head -5
done
cfg=bench/configs/qwen3.8-flash-next.json
for order in "base v1 v2 v3" "v3 v2 v1 base"; do for v in $order; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done; done
for v in v1 v3; do
  k=hc_up_mix_kernel
  timeout 200 ncu -k regex:$k -s 10 -c 1 --import-source no --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters --export $OUT/${k}_$v build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 > $OUT/ncu_$v.txt 2>&1
  echo "ncu $v rc=$?"
  timeout 60 ncu --import $OUT/${k}_$v.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${v}_sass.csv 2>&1
  grep -v "^==PROF==" $OUT/ncu_$v.txt | grep -E "Duration|Throughput|Warp Cycles Per Issued|Issue Slots|Eligible|No Eligible|Stall|Pipe" | head -30
done
