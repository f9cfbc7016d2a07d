#!/usr/bin/env bash
# Session 35, visit 1: what session 34 left for the next visit on fa57d0c (= b73da54's binaries): the whole GPU
# suite, memcheck on the GDN / fused-decode tests and the ple_qsa golden fixture, the benchmark at 1K / 32K, and
# decode timelines at 1K and 32K (CUPTI; 16 steps).
# Carry build/carry.tar.xz (build/cuda/bin/{imp,lib}, build/cuda/tests/imp_gpu_tests, build/exp/{libkernel_timeline.so,lib}).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/cuda/tests/imp_gpu_tests > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|tests ran|golden-cuda" $R/gpu_tests.log | tail -14
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 build/cuda/tests/imp_gpu_tests \
  --gtest_filter='GpuGatedDeltaNet.*:GpuDecodeFused.*:*Golden*/ple_qsa' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -2 $R/memcheck.log
for ctx in 1024 32768; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 120 build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context $ctx --runs 1 --out "$R/tl_$ctx.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 > "$R/tl_$ctx.txt" 2>&1; rm -f "$OUT/tl.csv"
  echo "== timeline $ctx"; head -1 "$R/tl_$ctx.txt"; grep -A4 "^half-layers" "$R/tl_$ctx.txt"
done
IMP_COMMIT=fa57d0c timeout 200 build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
  --pp 1 --tg 128 --context 1024,32768 --runs 5 --out $R/bench.json > /dev/null 2> $R/bench.log
echo "bench rc=$?"; grep -E "tg |roofline" $R/bench.log
tar -czf $OUT/visit1.tar.gz -C $R . && rm -rf $R
