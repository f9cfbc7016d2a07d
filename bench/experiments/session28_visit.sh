#!/usr/bin/env bash
# Prepared in session 27 (compiled, not run; its device time was spent). The cluster QSA decode selection (803adfa)
# takes 10.6 us on the critical path at 32K (timeline 2026-12-01_decode_timeline_32k_803adfa.txt) for ~5 us of work.
# Variants of the tree (head30):
#   pbw  (session27_qsa_select_position_before_wait.patch): the selection reads the position before its PDL wait;
#   onex (session27_qsa_select_one_exchange.patch): its output slots from one packed scan and one cluster exchange
#        instead of two of each (arithmetic checked by session27_qsa_one_exchange_emulation.py);
#   comb (session27_attention_combine_loads_first.patch): the decode attention combine issues its accumulator loads
#        before the split stats, so its two L2 round trips after the wait overlap (~1 us per attention layer?).
# Steps: 1. qsa_select_phase_probe (bench/experiments/qsa_select_phase_probe.cu) of head30, pbw and onex: where the
# selection's time goes after the scores' end; 2. the variants' tests (QSA or attention, and golden); 3. tg at 1K of
# head30 and comb; 4. the A/B of all four, tg 128 at 32K and pp 4096, two rounds (~7 minutes in all).
# Build here first (a fresh checkout has no build/: scripts/install_deps.sh, cmake --preset cuda, then):
#   bench/tools/build_variant.sh - head30
#   bench/tools/build_variant.sh bench/experiments/session27_qsa_select_position_before_wait.patch pbw
#   bench/tools/build_variant.sh bench/experiments/session27_attention_combine_loads_first.patch comb
#   bench/tools/build_variant.sh bench/experiments/session27_qsa_select_one_exchange.patch onex
#   probe() { nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Isrc \
#     bench/experiments/qsa_select_phase_probe.cu build/cuda/libimp_cuda.a build/cuda/libimp_lib.a -lcuda -o "$1"; }
#   probe build/exp/qsa_probe_head30
#   for v in pbw:position_before_wait onex:one_exchange; do p=bench/experiments/session27_qsa_select_${v#*:}.patch
#     git apply $p && probe build/exp/qsa_probe_${v%%:*}; git apply -R $p; done
# Carry build/carry.tar.xz with build/exp/{imp_{head30,pbw,onex,comb},imp_gpu_tests_{pbw,onex,comb},qsa_probe_{head30,pbw,onex}}, their
# .label files and build/cuda/bin/lib (libcpp-httplib and the brotli libraries the GPU machine lacks).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
for v in head30 pbw onex; do
  echo "== probe $v"; timeout 60 build/exp/qsa_probe_$v 32768 2>&1 | tee "$out/qsa_probe_$v.txt"
done
for v in pbw onex; do
  timeout 120 build/exp/imp_gpu_tests_$v --gtest_filter='*GpuQsa*:*Golden*' > "$out/gpu_tests_$v.log" 2>&1
  echo "$v qsa+golden tests rc=$?"; grep -E "FAILED|PASSED|golden-cuda.*(qsa|long)" "$out/gpu_tests_$v.log" | tail -4
done
timeout 120 build/exp/imp_gpu_tests_comb --gtest_filter='*GpuAttention*:*DecodeFused*:*Golden*' > "$out/gpu_tests_comb.log" 2>&1
echo "comb attention+golden tests rc=$?"; grep -E "FAILED|PASSED|golden-cuda.*(qsa|long)" "$out/gpu_tests_comb.log" | tail -4
for v in head30 comb; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 150 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json \
    --backend cuda --pp 1 --tg 128 --context 1024 --runs 5 --out "$out/tg1k_$v.json" > /dev/null 2> "$out/tg1k_$v.log"
  echo "$v tg 1K rc=$?: $(grep -E 'tg ' "$out/tg1k_$v.log" | cut -c12-90)"
done
VARIANTS="head30 pbw onex comb" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
