#!/usr/bin/env bash
# A visit for the experiments session 18 prepared (not yet run on a GPU): the decode hyper-connection read probe;
# the GPU tests (GDN prefill and golden) of pairs2 = bench/experiments/gdn_scan_pair_words.patch +
# gdn_out_pair_words.patch; the GDN scan phase probe (main, pairs = the scan patch alone, pairs2); a prefill A/B of the
# three (alternating, medians of 5). Build here first:
#   bench/tools/build_variant.sh - main
#   bench/tools/build_variant.sh bench/experiments/gdn_scan_pair_words.patch pairs
#   git apply bench/experiments/gdn_scan_pair_words.patch && \
#     bench/tools/build_variant.sh bench/experiments/gdn_out_pair_words.patch pairs2; \
#     git apply -R bench/experiments/gdn_scan_pair_words.patch
#   probe() { nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
#     bench/experiments/$1.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o build/probes/$2; }
#   mkdir -p build/probes && probe hc_read_phase_probe hc_read && probe gdn_scan_phase_probe scan_main
#   (then probe gdn_scan_phase_probe scan_pairs and scan_pairs2 with each patch set applied, as above)
# Carry: build/exp/imp_main, build/exp/imp_pairs, build/exp/imp_pairs2, build/exp/imp_gpu_tests_pairs2,
# build/probes, build/cuda/bin/lib (~50 MB with the tree; 64 MiB at most). If pairs2's tests fail, test pairs alone
# (imp_gpu_tests_pairs) in the next visit.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
echo "== hc read probe"; build/probes/hc_read 2>&1 | tee "$out/hc_read_probe.txt"
build/exp/imp_gpu_tests_pairs2 --gtest_filter='*GatedDeltaNetPrefill*:*Golden*' > "$out/gpu_tests_pairs2.log" 2>&1
echo "pairs2 tests rc=$? (${SECONDS}s)"; grep -E "golden-cuda|FAILED|PASSED|gdn prefill" "$out/gpu_tests_pairs2.log" | tail -30
for v in main pairs pairs2; do
  echo "== probe $v"; build/probes/scan_$v 2>&1 | tee "$out/probe_$v.txt"
done
for i in 1 2; do
  for v in main pairs pairs2; do
    build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 512,4096,16384 --tg 1 --context 1 --runs 5 \
      --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E 'pp ' "$out/ab_${v}_$i.log" | cut -c12-62 | tr '\n' ' ') (${SECONDS}s)"
  done
done
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
