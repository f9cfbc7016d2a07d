#!/usr/bin/env bash
# Prepared in session 27 (compiled, not run; its device time was spent). The cluster QSA decode selection (803adfa)
# takes 10.6 us on the critical path at 32K (timeline 2026-12-01_decode_timeline_32k_803adfa.txt) for ~5 us of work.
#   1. qsa_select_phase_probe on the tree (head30) and with session27_qsa_select_position_before_wait.patch (pbw):
#      where the selection's time goes after the scores' end (entry, wait, keys, each pass, end);
#   2. pbw's QSA tests, and comb's (session27_attention_combine_loads_first.patch: the decode attention combine
#      issues its accumulator loads before the split stats, so the two L2 round trips after its wait overlap;
#      ~1 us per attention layer expected) attention and golden tests;
#   3. the A/B head30 vs pbw vs comb: tg 128 at 32K (and pp 4096), two rounds; then tg at 1K for head30 and comb.
# If the cluster selection's probe shows its cluster barriers dominate: its two scan exchanges can be one (each
# block publishes its ties and above counts; every block derives the lower ranks' kept counts from them).
# Build here first (a fresh checkout has no build/: scripts/install_deps.sh, cmake --preset cuda, then):
#   bench/tools/build_variant.sh - head30
#   bench/tools/build_variant.sh bench/experiments/session27_qsa_select_position_before_wait.patch pbw
#   bench/tools/build_variant.sh bench/experiments/session27_attention_combine_loads_first.patch comb
#   probe() { nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
#     bench/experiments/qsa_select_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o "$1"; }
#   probe build/exp/qsa_probe_head30
#   git apply bench/experiments/session27_qsa_select_position_before_wait.patch && probe build/exp/qsa_probe_pbw; \
#     git apply -R bench/experiments/session27_qsa_select_position_before_wait.patch
# Carry build/carry.tar.xz with build/exp/{imp_head30,imp_pbw,imp_comb,imp_gpu_tests_{pbw,comb},qsa_probe_{head30,pbw}}, their
# .label files and build/cuda/bin/lib (libcpp-httplib and the brotli libraries the GPU machine lacks).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
for v in head30 pbw; do
  echo "== probe $v"; timeout 60 build/exp/qsa_probe_$v 32768 2>&1 | tee "$out/qsa_probe_$v.txt"
done
timeout 120 build/exp/imp_gpu_tests_pbw --gtest_filter='*GpuQsa*:*Golden*' > "$out/gpu_tests_pbw.log" 2>&1
echo "pbw qsa+golden tests rc=$?"; grep -E "FAILED|PASSED|golden-cuda.*(qsa|long)" "$out/gpu_tests_pbw.log" | tail -4
timeout 120 build/exp/imp_gpu_tests_comb --gtest_filter='*GpuAttention*:*DecodeFused*:*Golden*' > "$out/gpu_tests_comb.log" 2>&1
echo "comb attention+golden tests rc=$?"; grep -E "FAILED|PASSED|golden-cuda.*(qsa|long)" "$out/gpu_tests_comb.log" | tail -4
for v in head30 comb; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 150 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
    --backend cuda --pp 1 --tg 128 --context 1024 --runs 5 --out "$out/tg1k_$v.json" > /dev/null 2> "$out/tg1k_$v.log"
  echo "$v tg 1K rc=$?: $(grep -E 'tg ' "$out/tg1k_$v.log" | cut -c12-90)"
done
VARIANTS="head30 pbw comb" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
