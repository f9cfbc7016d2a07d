# Session 31, visit 4: Nsight Compute (speed of light, compute and memory workload, warp states, SASS source
# counters) of three prefill kernels of 1d62d7b at pp 4096 on the 4-layer slice, for the next session's choices:
# moe_down_kernel, hc_write_norm_split_row_kernel, attention_prefill_wgmma_kernel.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
o=$OUT/v4; mkdir -p $o
for k in moe_down_kernel hc_write_norm_split_row_kernel attention_prefill_wgmma_kernel; do
  timeout 120 ncu -k regex:$k -s 1 -c 1 --import-source no --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SourceCounters --section Occupancy --section LaunchStats \
    --export $o/$k build/cuda/bin/imp bench --dummy bench/configs/flash-next-4layers.json --backend cuda --pp 4096 --tg 1 \
    --context 1 --runs 1 > $o/ncu_run_$k.txt 2>&1
  echo "ncu $k rc=$?"
  timeout 60 ncu --import $o/$k.ncu-rep --print-details all > $o/${k}_details.txt 2>&1
  timeout 60 ncu --import $o/$k.ncu-rep --page source --csv --print-source sass > $o/${k}_sass.csv 2>&1
  grep -E "Duration|DRAM Throughput|L2 Cache Throughput|Compute \(SM\)|Issued Warp|Pipe Tensor Cycles" $o/${k}_details.txt | head -8
done
rm -f $o/*.ncu-rep
tar -czf $OUT/v4.tar.gz -C $OUT v4 && rm -rf $o
