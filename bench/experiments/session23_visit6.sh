#!/usr/bin/env bash
# Session 23, visit 6: the final tree (the MoE prefill wgmma width in steps of 16 pairs): every GPU test, memcheck
# on the changed kernel's and a fixture model's tests, the benchmark. Carry build/carry.tar.xz (build/cuda/bin/imp,
# build/cuda/tests/imp_gpu_tests, build/cuda/bin/lib).
set -uo pipefail
MEMCHECK_FILTER='*Golden*/nvfp4:*MoePrefill*Tiny*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" GENERATE=0 SERVER=0 bash scripts/gpu_visit.sh
