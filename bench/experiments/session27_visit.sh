#!/usr/bin/env bash
# Prepared in session 26 (its device time was spent). The full validation of the tree as session 26 left it
# (head28 = c87595b, same code as 53e805e: d507e94's TMA flash attention and 024dda0's persistent MoE prefill blocks): every GPU test (the
# TMA attention ran only its attention, golden and prefill tests), the benchmark (pp 512, 4096, 16384; tg 128 at 1K
# and 32K), memcheck, generate cuda vs cpu.
# Build here: bench/tools/build_variant.sh - head28. Carry build/carry.tar.xz (build/exp/imp_head28,
# imp_gpu_tests_head28, build/cuda/bin/lib; session 26 packed it with the session27_visit2.sh binaries).
set -uo pipefail
mkdir -p build/cuda/tests; cp build/exp/imp_head28 build/cuda/bin/imp; cp build/exp/imp_gpu_tests_head28 build/cuda/tests/imp_gpu_tests
IMP_COMMIT=53e805e MEMCHECK_FILTER='*Golden*/nvfp4:*Golden*/ple_qsa:*MoePrefill*Tiny*:*AttentionPrefill*Small*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" SERVER=0 bash scripts/gpu_visit.sh
