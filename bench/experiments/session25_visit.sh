#!/usr/bin/env bash
# Prepared in session 24 (not run: its device time was spent). Why were the MoE prefill GEMMs with blocks of several
# items slower (session24_moe_prefill_persistent_items.patch, "persist2": gate/up 1004 against 719, down 866 against
# 463 us per layer at pp 4096, 2026-12-01_session24_ab.txt visit 8), when each item's k loop is the same and the
# next item's first chunks are loaded during the current item's tail? Nsight Compute on the 4-layer slice, the first
# pp 4096 launch of each GEMM of both builds: durations, warp stalls per issue and per SASS instruction (summarize
# with bench/tools/ncu_sass_top.py), L1 / L2 / DRAM throughput. Suspects: down's 4-byte partial stores from the
# accumulators, the 226 KB of shared memory (little L1 left), the k loop instantiated per item (4 x 8 copies in
# gate/up: instruction cache), thread 0's feed between two barriers, the items' order (block b takes items b + n B,
# so a tile's row blocks meet in L2 only while the blocks stay in step). Then an A/B with two variants that each
# change one suspect: p_contiguous (session25_moe_prefill_persistent_items_contiguous.patch: block b takes items
# b kItems + n, a tile's row blocks in turn) and p_two (..._two.patch: gate/up blocks of two items, half the k-loop
# copies), and prefill timelines of all four.
# Build here: bench/tools/build_variant.sh - head25; bench/tools/build_variant.sh
# bench/experiments/session24_moe_prefill_persistent_items.patch persist2; the same for the two session25 patches
# as p_contiguous and p_two. Carry build/carry.tar.xz (build/exp/imp_{head25,persist2,p_contiguous,p_two},
# build/cuda/bin/lib, build/exp/lib, build/exp/libkernel_timeline.so).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/flash-next-4layers.json
echo "== gpu tests of the head (996d066's launcher mend ran on no GPU yet)"
build/exp/imp_gpu_tests_head25 --gtest_filter="*MoePrefill*:*Golden*:*Prefill*" > "$out/gpu_tests_head25.log" 2>&1; echo "gpu tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests_head25.log" | tail -20
sections="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
stalls="--metrics regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$"
for v in head25 persist2; do
  for kernel in moe_gate_up_kernel moe_down_kernel; do
    name=${v}_${kernel}
    timeout 170 ncu $sections $stalls --clock-control none -k "regex:$kernel" --launch-skip 1 --launch-count 1 \
      -o "$out/$name" build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 \
      > "$out/${name}_run.log" 2>&1
    echo "ncu $name rc=$?"
    ncu -i "$out/$name.ncu-rep" --page details --print-details all > "$out/${name}_details.txt" 2>&1
    ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/${name}_sass.csv" 2>&1
    rm -f "$out/$name.ncu-rep"
    grep -E "Duration|L1/TEX Hit|L2 Hit|DRAM Throughput|Registers Per|Shared Memory Config" "$out/${name}_details.txt" | head -8
  done
done
VARIANTS="head25 persist2 p_contiguous p_two" AB_ARGS="--pp 4096 --tg 1 --context 1 --runs 5" \
  bash bench/tools/variants_visit.sh  # packs everything in $OUT into visit_outputs.tar.gz
