#!/usr/bin/env bash
# Session 23, visit 3: where the warps of the three largest kernels wait, per SASS instruction (Nsight Compute
# SourceCounters: PC sampling with stall reasons, and the per-issue stall ratios of WarpStateStats). Session 23's
# four-warpgroup MoE prefill GEMM (twice the warps per scheduler) was not faster (2026-12-01_session23_ab.txt), so
# the prefill gate/up GEMM is not bound by warp latency hiding alone; this asks what it waits for instead. The
# decode MoE gate/up and the output-projection GEMV (the two largest decode kernels) are profiled alongside (under
# ncu the kernels run serialized, without the PDL overlap of the graph: their in-kernel stalls only).
# Carry build/carry.tar.xz (build/exp/imp_head = 01655ca, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/flash-next-4layers.json
sections="--section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --section InstructionStats"
stalls="--metrics regex:^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$"
profile() {  # name kernel-regex skip bench-args...
  local name=$1 kernel=$2 skip=$3; shift 3
  timeout 170 ncu $sections $stalls --clock-control none -k "regex:$kernel" --launch-skip "$skip" --launch-count 1 \
    -o "$out/$name" build/exp/imp_head bench --dummy $cfg --backend cuda "$@" > "$out/${name}_run.log" 2>&1
  echo "ncu $name rc=$?"
  ncu -i "$out/$name.ncu-rep" --page details --print-details all > "$out/${name}_details.txt" 2>&1
  ncu -i "$out/$name.ncu-rep" --page raw --csv > "$out/${name}_raw.csv" 2>&1
  ncu -i "$out/$name.ncu-rep" --page source --csv --print-source sass > "$out/${name}_sass.csv" 2>&1
  echo "  sass rows: $(wc -l < "$out/${name}_sass.csv")"; grep -iE "stalled_[a-z_]+_per_issue_active" "$out/${name}_details.txt" | head -30
}
profile prefill_gate_up moe_gate_up_kernel 1 --pp 4096 --tg 1 --context 1 --runs 1
profile decode_gate_up moe_decode_gate_up 16 --pp 1 --tg 8 --context 1024 --runs 1
profile decode_hc_write gemv_bf16_hc_write 16 --pp 1 --tg 8 --context 1024 --runs 1
archive=$(mktemp /tmp/visit_outputs.XXXXXX)
tar -czf "$archive" -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv "$archive" "$out/visit_outputs.tar.gz"
