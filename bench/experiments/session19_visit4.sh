#!/usr/bin/env bash
# Session 19, fourth visit: on top of 388c4e5 (base: the read-down with three rows per block), um =
# bench/experiments/hc_read_up_mix_segments.patch (each up/mix lane on one stream's chunks, the sums reduced within
# segments), umw = um + gemv_whole_batch.patch (the MoE input GEMV's weights all before the PDL wait), umr =
# hc_read_up_mix_segments_shared_norm.patch (um + the read-down's (1 + w) * s once per chunk for all its rows).
# Phase probes, the GPU tests of umw and umr, then a decode A/B (tg 128 at 1K and 32K, alternating, two rounds).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in base um umr; do echo "== probe $v"; build/probes/hc_$v 2>&1 | tee "$out/probe_$v.txt"; done
for v in umw umr; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*HyperConnection*:*Gemv*:*Golden*:*Decode*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v tests rc=$? (${SECONDS}s)"; grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -14
done
VARIANTS="base um umw umr" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
