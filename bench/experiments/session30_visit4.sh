# Session 30, visit 4: the fused up/mix kernel v6 (v3 with each thread's x columns in runs of four: 8-byte loads of
# N's terms, B copied by cp.async in that row order): tests incl. golden, pp 4096 A/B against f1a88c7 and v3,
# timeline and Nsight Compute of v6.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
v=v6
timeout 120 build/exp/imp_gpu_tests_$v --gtest_filter='GpuHyperConnection.*:*Golden*' > $OUT/tests_$v.txt 2>&1; echo "$v tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|golden-cuda" $OUT/tests_$v.txt | head -12
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_$v --gtest_filter='GpuHyperConnection.UpMix*' > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/memcheck.txt
cfg=bench/configs/qwen3.8-flash-next.json
for order in "base v3 v6" "v6 v3 base" "base v6 v3"; do for v in $order; do
  timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done; done
v=v6
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 120 build/exp/imp_$v bench --dummy $cfg --backend cuda \
  --pp 4096 --tg 1 --context 1 --runs 2 --out "$OUT/tl_$v.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --prefill --steps 1 --detail 0 > "$OUT/tl_$v.txt" 2>&1
head -2 "$OUT/tl_$v.txt"; grep -E "hc_up_mix|hc_mix" "$OUT/tl_$v.txt"; rm -f "$OUT/tl.csv"
k=hc_up_mix_kernel
timeout 200 ncu -k regex:$k -s 10 -c 1 --import-source no --section SpeedOfLight --section WarpStateStats --section SourceCounters --export $OUT/${k}_$v build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 > /dev/null 2>&1
echo "ncu $v rc=$?"
timeout 60 ncu --import $OUT/${k}_$v.ncu-rep --print-details all > $OUT/ncu_${v}_details.txt 2>&1
timeout 60 ncu --import $OUT/${k}_$v.ncu-rep --page source --csv --print-source sass > $OUT/ncu_${v}_sass.csv 2>&1
grep -E "Duration|Throughput|Issued Warp|Stall (Long|Wait|LG|Barrier)" $OUT/ncu_${v}_details.txt | head -14
rm -f $OUT/*.ncu-rep
