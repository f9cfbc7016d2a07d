#!/usr/bin/env bash
# One visit to the GPU machine: kernel tests against their CPU twins, compute-sanitizer, then the kernel
# benchmarks. Expects build/cuda from this machine (carried); writes logs and JSON under $OUT.
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/nvidia_smi.txt"
echo "== gpu tests"
build/cuda/tests/imp_gpu_tests --gtest_output=json:"$out/gpu_tests.json" 2>&1 | tee "$out/gpu_tests.log" | tail -25
echo "== compute-sanitizer memcheck"
compute-sanitizer --tool memcheck --error-exitcode 3 build/cuda/tests/imp_gpu_tests 2>&1 | tail -6 | tee "$out/memcheck.log"
echo "== kernel bench"
build/cuda/bin/imp_kernel_bench 2>&1 | tee "$out/kernel_bench.json"
