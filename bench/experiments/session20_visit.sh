#!/usr/bin/env bash
# Prepared in session 19 (not yet run): where the decode MoE gate/up's 17 us per layer go on the current tree.
# 1. bench/experiments/moe_phase_probe.cu as the decode step runs it (gate/up then down, 48 layers in a PDL graph)
#    and gate/up alone: per phase, and the blocks' end by how many gate/up blocks shared their SM;
# 2. Nsight Compute on the last layer's gate/up in the probe: warp states and, per SASS instruction, the stall
#    samples (source page; if this ncu cannot print it, the details page);
# 3. the hyper-connection read probe, for the record of the current kernels.
# Build here first:
#   probe() { nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
#     bench/experiments/$1.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o build/probes/$2; }
#   ninja -C build/cuda imp_cuda imp_lib && mkdir -p build/probes && probe moe_phase_probe moe_phase && \
#     probe hc_read_phase_probe hc_read
# Carry build/probes (and build/cuda/bin/lib for the shared libraries).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
echo "== moe phase probe (gate/up + down)"; build/probes/moe_phase 2>&1 | tee "$out/moe_phase.txt"
echo "== moe phase probe (gate/up alone)"; build/probes/moe_phase gate_up 2>&1 | tee "$out/moe_phase_gate_up.txt"
echo "== hc read probe"; build/probes/hc_read 2>&1 | tee "$out/hc_read.txt"
# The graph's 48 gate/up launches come 6 times (5 warm-up replays and the timed one): the last of the first replay.
ncu_args=(-k regex:moe_decode_gate_up --launch-skip 47 --launch-count 1 --clock-control none)
timeout 300 ncu "${ncu_args[@]}" --section WarpStateStats --section SourceCounters --section Occupancy \
  --section LaunchStats --section SpeedOfLight --page source --print-source sass --csv build/probes/moe_phase \
  > "$out/ncu_gate_up_source.csv" 2> "$out/ncu_gate_up_source.err"
echo "ncu source rc=$? ($(wc -l < "$out/ncu_gate_up_source.csv") lines)"
if [ "$(wc -l < "$out/ncu_gate_up_source.csv")" -lt 50 ]; then
  timeout 300 ncu "${ncu_args[@]}" --section WarpStateStats --section SourceCounters --section Occupancy \
    --section LaunchStats --section SpeedOfLight build/probes/moe_phase > "$out/ncu_gate_up_details.txt" 2>&1
  echo "ncu details rc=$?"; grep -E "Stall|Warp Cycles|Achieved|Duration|Throughput" "$out/ncu_gate_up_details.txt" | head -40
fi
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
