#!/usr/bin/env bash
# Prepared in session 37 for the next session's first visit (~5 min):
# - the tree (7121660 and later: the decode step as two graphs captured at a sequence's first step, the whole-SM
#   selection beyond the QSA budget), which session 37 compiled and CI-tested but ran only in the lazily captured
#   form: the whole GPU suite (it takes ~125 s), memcheck of the QSA decode and golden ple_qsa / long_sparse tests
#   (both decode beyond their budgets), and `imp bench` at 1K / 32K (session 37: 252.8 / 245.1);
# - bench/experiments/green_context_probe.cu at 16 and 8 SMs for the small partition (docs/cuda_engine.md, Next
#   steps 1 (a)).
# Build: bench/tools/build_variant.sh - main (label it with the commit), and
#   nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a bench/experiments/green_context_probe.cu -lcuda \
#     -o build/exp/green_context_probe
# Carry build/exp/{imp_main,imp_main.label,imp_gpu_tests_main,green_context_probe} and build/cuda/bin/lib (packed as
# build/carry.tar.xz); run `tar -xJf build/carry.tar.xz && timeout 590 bash bench/experiments/session38_visit1.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 240 build/exp/imp_gpu_tests_main > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_main \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:*Golden*/ple_qsa:*Golden*/long_sparse' \
  > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.log
IMP_COMMIT="$(cat build/exp/imp_main.label)" timeout 120 build/exp/imp_main bench --dummy bench/configs/qwen3.8-flash-next.json \
  --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 --out "$R/bench_main.json" > /dev/null 2> "$R/bench_main.log"
echo "bench rc=$?: $(grep -E 'tg |roofline' "$R/bench_main.log" | cut -c12-120 | tr '\n' ' ')"
for sms in 16 8; do
  echo "== green_context_probe $sms"; timeout 60 build/exp/green_context_probe $sms 2>&1 | tee "$R/green_context_probe_$sms.txt"
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
