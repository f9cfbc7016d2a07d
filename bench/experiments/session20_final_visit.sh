#!/usr/bin/env bash
# Session 20's final visit: scripts/gpu_visit.sh on the final build (build/cuda; IMP_COMMIT and the other
# settings as below), then Nsight Compute's per-instruction stall view of the decode attention's partial kernel
# in its phase probe at 1K and 32K (the scores phase takes ~4 us for ~1 us of instructions), then a decode A/B of
# the session's start (base = 38aebcd) against the final build (head). Carry build/carry.tar.xz (build/cuda/bin/imp,
# build/cuda/tests/imp_gpu_tests, build/cuda/bin/lib, build/exp/{libkernel_timeline.so,lib,imp_base,imp_head},
# build/wheels, build/probes/attention_phase).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
IMP_COMMIT=${IMP_COMMIT:?} TIMELINE=1 TIMELINE_PREFILL=1 \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128,512 --context 1024,32768 --runs 5" \
  MEMCHECK_FILTER='*Golden*/ple_qsa:*Golden*/nvfp4:*Golden*/many_experts:*Golden*/long_sparse:*Ngram*:*Qsa*:*HyperConnection*:*GpuPle*:*MoePrefill*Tiny*:*GatedDeltaNetPrefill*SmallShapes*:*MoeDecodeFused*:*Expert*' \
  bash scripts/gpu_visit.sh
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for c in 1024 32768; do
  timeout 120 ncu -k regex:attention_decode_partial --launch-skip 11 --launch-count 1 --clock-control none \
    --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy --page source \
    --print-source sass --csv build/probes/attention_phase $c > "$out/ncu_attention_partial_$c.csv" 2> "$out/ncu_attention_partial_$c.err"
  echo "ncu attention $c rc=$? ($(wc -l < "$out/ncu_attention_partial_$c.csv") lines)"
done
VARIANTS="base head" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
