#!/usr/bin/env bash
# Session 19, fourth visit: on top of 388c4e5 (base: the read-down with three rows per block), um =
# bench/experiments/hc_read_up_mix_segments.patch (each up/mix lane on one stream's chunks, the sums reduced within
# segments), umw = um + gemv_whole_batch.patch (the MoE input GEMV's weights all before the PDL wait), umr =
# hc_read_up_mix_segments_shared_norm.patch (um + the read-down's (1 + w) * s once per chunk for all its rows).
# Phase probes, the GPU tests of umw and umr, then a decode A/B (tg 128 at 1K and 32K, alternating, two rounds).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for v in base um umr; do echo "== probe $v"; build/probes/hc_$v 2>&1 | tee "$out/probe_$v.txt"; done
for v in umw umr; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*HyperConnection*:*Gemv*:*Golden*:*Decode*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v tests rc=$? (${SECONDS}s)"; grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -14
done
for i in 1 2; do
  for v in base um umw umr; do
    build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 \
      --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E 'tg ' "$out/ab_${v}_$i.log" | cut -c12-70 | tr '\n' ' ') (${SECONDS}s)"
  done
done
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
