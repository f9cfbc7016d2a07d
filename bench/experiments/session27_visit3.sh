#!/usr/bin/env bash
# Session 27, visit 3: the QSA decode selection with its keys staged in shared memory (qsa = head29 + that change;
# head29 = 36c2680: session 26's TMA attention with the gate prefetch and the shared softmax step).
#   1. every GPU test on qsa (it holds all of head29's code), head29's own if qsa fails; memcheck on the QSA tests;
#   2. a decode timeline at 32K on qsa (the select kernel was 12.4 us per layer on the critical path at 6dfaf9f);
#   3. the A/B head29 vs qsa: pp 4096 and tg 128 at 32K, two rounds (bench/tools/variants_visit.sh, last: it packs
#      $OUT).
# Build here: bench/tools/build_variant.sh - head29 (at 36c2680), then - qsa with the change in the tree.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
timeout 300 build/exp/imp_gpu_tests_qsa > "$out/gpu_tests_qsa.log" 2>&1; rc=$?; echo "qsa gpu tests rc=$rc"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests_qsa.log" | tail -14
if [ $rc != 0 ]; then
  timeout 300 build/exp/imp_gpu_tests_head29 > "$out/gpu_tests_head29.log" 2>&1; echo "head29 gpu tests rc=$?"
  grep -E "FAILED|PASSED|tests ran" "$out/gpu_tests_head29.log" | tail -8
fi
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_qsa \
  --gtest_filter='*GpuQsa*:-*At32k*:*BeyondSharedMemory*' > "$out/memcheck_qsa.log" 2>&1
echo "qsa memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck_qsa.log" | tail -3
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$out/tl32k.csv" timeout 150 build/exp/imp_qsa bench --dummy $cfg --backend cuda --pp 1 --tg 24 \
  --context 32768 --runs 1 --out "$out/tl32k_qsa.json" > /dev/null 2> "$out/tl32k_qsa.log"
echo "timeline rc=$?"
python3 bench/tools/timeline_summary.py "$out/tl32k.csv" --steps 16 --detail 0 --segments > "$out/decode_timeline_32k_qsa.txt" 2>&1
grep -E "^steps|qsa_|attention x" "$out/decode_timeline_32k_qsa.txt"; rm -f "$out/tl32k.csv"
VARIANTS="head29 qsa" TL_VARIANTS="" AB_ARGS="--pp 4096 --tg 128 --context 32768 --runs 5" bash bench/tools/variants_visit.sh
