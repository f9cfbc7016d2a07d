#!/usr/bin/env bash
# Session 19, seventh visit: as the sixth (session19_visit6.sh) with 1 load per lane: hcw1 (v_hcw1.patch, the output
# projection only) and g1 (v_gemv_batch1.patch: every decode GEMV); tests of g1, then the decode A/B.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for v in g1; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*DecodeFused*:*Golden*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v tests rc=$? (${SECONDS}s)"; grep -E "FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -4
done
for i in 1 2; do
  for v in head hcw1 g1; do
    build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 \
      --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E 'tg ' "$out/ab_${v}_$i.log" | cut -c12-70 | tr '\n' ' ') (${SECONDS}s)"
  done
done
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
