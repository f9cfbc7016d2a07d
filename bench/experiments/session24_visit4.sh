#!/usr/bin/env bash
# Session 24, visit 7: persist (= 9d7101c: MoE prefill blocks of several items, one ring across them; visit 6's
# run stopped at a shared-memory request 256 bytes too large) against tma (= 6354291), then the full validation
# (every GPU test, memcheck, the benchmark) of the winner: persist if its tests and memcheck pass and it is faster
# at pp 4096 over two alternating rounds, else tma.
# Build here: bench/tools/build_variant.sh - persist (at 9d7101c); build/exp/imp_tma, imp_gpu_tests_tma from visit 5.
# Carry build/carry.tar.xz (build/exp/imp_{tma,persist}, build/exp/imp_gpu_tests_{tma,persist}, build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
ok=1
timeout 200 build/exp/imp_gpu_tests_persist --gtest_filter='*MoePrefill*:*Golden*:*Prefill*' > "$out/gpu_tests_persist.log" 2>&1 || ok=0
echo "tests persist: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_persist.log" | tr '\n' ' ')"
grep -E "Failure|rror" "$out/gpu_tests_persist.log" | head -6
timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_persist \
  --gtest_filter='*MoePrefill*Tiny*:*Golden*/nvfp4' > "$out/memcheck_persist.log" 2>&1 || ok=0
echo "memcheck persist: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/memcheck_persist.log" | tr '\n' ' ')"
declare -A sum=([tma]=0 [persist]=0)
for i in 1 2; do
  for v in tma persist; do
    timeout 100 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 512,4096,16384 \
      --tg 1 --context 1 --runs 5 --out "$out/${v}_$i.json" > /dev/null 2> "$out/${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E 'pp ' "$out/${v}_$i.log" | cut -c12-60 | tr '\n' ' ')"
    tps=$(grep -E 'pp +4096:' "$out/${v}_$i.log" | awk '{print int($5)}'); sum[$v]=$(( ${sum[$v]} + ${tps:-0} ))
  done
done
winner=tma; sha=6354291
if [ $ok = 1 ] && [ ${sum[persist]} -gt ${sum[tma]} ]; then winner=persist; sha=9d7101c; fi
echo "== winner: $winner ($sha): pp 4096 sums tma ${sum[tma]}, persist ${sum[persist]}"
cp build/exp/imp_$winner build/cuda/bin/imp; mkdir -p build/cuda/tests; cp build/exp/imp_gpu_tests_$winner build/cuda/tests/imp_gpu_tests
IMP_COMMIT=$sha MEMCHECK_FILTER='*Golden*/nvfp4:*MoePrefill*Tiny*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" GENERATE=0 SERVER=0 bash scripts/gpu_visit.sh
