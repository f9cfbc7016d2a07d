# Session 30, visit 3: the fused up/mix kernel: v4 (epilogue in two halves, the first half's N loads during the
# last products), v5 (+ one 8-stage ring filled in turn order): tests, racecheck, pp 4096 A/B, timeline and
# Nsight Compute of v5.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in v4 v5; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='GpuHyperConnection.*' > $OUT/tests_$v.txt 2>&1; echo "$v hc tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure" $OUT/tests_$v.txt | head -5
done
timeout 120 compute-sanitizer --tool racecheck build/exp/imp_gpu_tests_v5 --gtest_filter='GpuHyperConnection.UpMix*' > $OUT/racecheck_v5.txt 2>&1; echo "racecheck rc=$?"; grep -E "Race reported|SUMMARY" $OUT/racecheck_v5.txt | sort | uniq -c | head
cfg=bench/configs/qwen3.8-flash-next.json
for order in "base v3 v4 v5" "v5 v4 v3 base"; do for v in $order; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done; done
v=v5
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 120 build/exp/imp_$v bench --dummy $cfg --backend cuda \
  --pp 4096 --tg 1 --context 1 --runs 2 --out "$OUT/tl_$v.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --prefill --steps 1 --detail 0 > "$OUT/tl_$v.txt" 2>&1
head -12 "$OUT/tl_$v.txt"; grep -E "hc_up_mix|hc_mix" "$OUT/tl_$v.txt"; rm -f "$OUT/tl.csv"
k=hc_up_mix_kernel
timeout 200 ncu -k regex:$k -s 10 -c 1 --import-source no --section SpeedOfLight --section WarpStateStats --section SourceCounters --export $OUT/${k}_$v build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 > /dev/null 2>&1
echo "ncu $v rc=$?"
timeout 60 ncu --import $OUT/${k}_$v.ncu-rep --print-details all > $OUT/ncu_${v}_details.txt 2>&1
timeout 60 ncu --import $OUT/${k}_$v.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${v}_sass.csv 2>&1
grep -E "Duration|Throughput|Issued|Eligible" $OUT/ncu_${v}_details.txt | head -12
rm -f $OUT/*.ncu-rep
