#!/usr/bin/env bash
# Session 22, visit 6: the final tree (the MoE prefill GEMM with three wgmma groups in flight on top of 6dfaf9f):
# every GPU test, memcheck on the fixture models, the benchmark. Carry build/carry.tar.xz (build/cuda/bin/imp,
# build/cuda/tests/imp_gpu_tests, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
MEMCHECK_FILTER='*Golden*/ple_qsa:*Golden*/nvfp4:*Golden*/many_experts:*Golden*/long_sparse:*MoeDecodeFused*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" GENERATE=0 SERVER=0 bash scripts/gpu_visit.sh
