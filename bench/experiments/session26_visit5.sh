#!/usr/bin/env bash
# Session 26, visit 5: Nsight Compute on the two prefill attention kernels, then the full validation of the kept
# MoE prefill change. Visits 3 and 4 found the wgmma flash attention correct but slower than the mma.sync kernel
# (870 against 734 us per layer at pp 4096, even with the producer's copies conflict-free): where do its warps
# wait? The 4-layer slice's pp 4096 attention launch of fab (session25_attention_prefill_wgmma.patch) and of head27
# (= 024dda0): durations, warp stalls per issue and per SASS instruction (bench/tools/ncu_sass_top.py), shared
# memory and L2 throughput. Then scripts/gpu_visit.sh with head27's build: every GPU test, the benchmark (pp 512,
# 4096, 16384; tg 128 at 1K and 32K), memcheck.
# Build here: bench/tools/build_variant.sh - head27; ... session25_attention_prefill_wgmma.patch fab. Carry
# build/carry.tar.xz (imp_head27, imp_gpu_tests_head27, imp_fab, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/flash-next-4layers.json
sections="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
stalls="--metrics regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$"
for pair in fab:attention_prefill_wgmma_kernel head27:attention_prefill_kernel; do
  v=${pair%%:*} kernel=${pair#*:} name=${pair%%:*}_attention
  timeout 100 ncu $sections $stalls --clock-control none -k "regex:$kernel" --launch-skip 1 --launch-count 1 \
    -o "$out/$name" build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 \
    > "$out/${name}_run.log" 2>&1
  echo "ncu $name rc=$?"
  ncu -i "$out/$name.ncu-rep" --page details --print-details all > "$out/${name}_details.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/${name}_sass.csv" 2>&1
  rm -f "$out/$name.ncu-rep"
  grep -E "Duration|Compute \(SM\) Throughput|Shared Memory|L2 Hit|DRAM Throughput|Registers Per|stalled_(barrier|long|short|wait|math|mio|lg|dispatch|sleeping|membar|branch)" "$out/${name}_details.txt" | head -24
done
mkdir -p build/cuda/tests; cp build/exp/imp_head27 build/cuda/bin/imp; cp build/exp/imp_gpu_tests_head27 build/cuda/tests/imp_gpu_tests
IMP_COMMIT=024dda0 MEMCHECK_FILTER='*Golden*/nvfp4:*Golden*/ple_qsa:*MoePrefill*Tiny*:*AttentionPrefill*Small*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" SERVER=0 bash scripts/gpu_visit.sh
