#!/usr/bin/env bash
# Session 20, visit 6: the decode attention's page table staged in shared memory before the PDL wait (pg): the
# attention phase probe at 1K and 32K, the attention and golden GPU tests with memcheck of the attention kernel
# tests, and a decode A/B against the committed tree (head). Carry build/carry.tar.xz (build/exp/imp_{head,pg},
# build/exp/imp_gpu_tests_pg, build/probes/attention_phase_pg, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for c in 1024 32768; do
  echo "== attention_phase_pg $c"; build/probes/attention_phase_pg $c 2>&1 | tee "$out/attention_phase_pg_$c.txt"
done
build/exp/imp_gpu_tests_pg --gtest_filter='*Attention*:*Golden*:*Qsa*' > "$out/gpu_tests_pg.log" 2>&1
echo "tests pg rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_pg.log" | tr '\n' ' ')"
timeout 200 compute-sanitizer --tool memcheck build/exp/imp_gpu_tests_pg --gtest_filter='GpuAttentionKernel.*' \
  > "$out/memcheck_pg.log" 2>&1
echo "memcheck pg rc=$?: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$out/memcheck_pg.log" | tail -3 | tr '\n' ' ')"
VARIANTS="head pg" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
