#!/usr/bin/env bash
# A visit for the GDN scan experiments of session 18 (not yet run): the scan phase probe on the tree and with
# bench/experiments/gdn_scan_pair_words.patch, that patch's GDN and golden GPU tests, and a prefill A/B (alternating,
# medians of 5). Build here first (each binary ~10 MB; carry build/exp and build/cuda/bin/lib):
#   bench/tools/build_variant.sh - main
#   bench/tools/build_variant.sh bench/experiments/gdn_scan_pair_words.patch pairs
#   probe() { nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
#     bench/experiments/gdn_scan_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o "$1"; }
#   probe build/exp/gdn_scan_phase_probe_main
#   git apply bench/experiments/gdn_scan_pair_words.patch && probe build/exp/gdn_scan_phase_probe_pairs; \
#     git apply -R bench/experiments/gdn_scan_pair_words.patch
#   rm build/exp/imp_gpu_tests_main   # not needed there (carry limit)
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
build/exp/imp_gpu_tests_pairs --gtest_filter='*GatedDeltaNetPrefill*:*Golden*' > "$out/gpu_tests_pairs.log" 2>&1
echo "pairs tests rc=$? (${SECONDS}s)"; grep -E "golden-cuda|FAILED|PASSED|gdn prefill" "$out/gpu_tests_pairs.log" | tail -30
for v in main pairs; do
  echo "== probe $v"; build/exp/gdn_scan_phase_probe_$v 2>&1 | tee "$out/probe_$v.txt"
done
for i in 1 2; do
  for v in main pairs; do
    build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 512,4096,16384 --tg 1 --context 1 --runs 5 \
      --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E 'pp ' "$out/ab_${v}_$i.log" | cut -c12-62 | tr '\n' ' ') (${SECONDS}s)"
  done
done
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
