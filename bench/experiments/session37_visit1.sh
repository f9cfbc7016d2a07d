#!/usr/bin/env bash
# Session 37, first visit (builds from 3ba2459's tree, made this session with bench/tools/build_variant.sh):
# - A/B (1K / 32K, two rounds) of s36 (= 3ba2459) against
#   ple   = session36_ple_capture_order.patch: the first PLE layer's token half captured just before its join;
#   sb4   = session36_qsa_score_batch_4.patch: the QSA score kernels load 4 block keys per batch (109 -> 80 registers);
#   st64  = session37_qsa_score_64_threads.patch: the score kernels on 512 blocks of 64 threads (batch 4), so a
#           score block fits where one retired in-projection GEMV block was (128 threads x 40 registers): the 32K
#           timelines have the score kernel ending 1.4 us after the main in-projection GEMV, ~15 us after the index
#           GEMV it waits for, as if its 256-thread blocks (109 registers, 8 KB) found room only as the GEMV drained;
#   st32  = session37_qsa_score_32_threads.patch: the same on 1024 one-warp blocks;
#   st64b8 = session37_qsa_score_64_threads_batch_8.patch: 64-thread blocks keeping 8 keys per batch;
#   st64r80 = session37_qsa_score_64_threads_80_registers.patch: st64 with the decode kernel capped at 80 registers
#           (102 -> 80, 8 bytes spilled), so a block is one GEMV block's registers;
# - the whole GPU suite of s36 (incl. the 8-index-head GpuQsa case) + memcheck of the QSA decode and golden ple_qsa
#   tests; GpuQsa of every score variant;
# - 32K timelines of st64 and st32.
# Run: `tar -xJf build/carry.tar.xz && timeout 590 bash bench/experiments/session37_visit1.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=$OUT/ab VARIANTS="s36 ple sb4 st64 st32 st64b8 st64r80" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
timeout 180 build/exp/imp_gpu_tests_s36 > $R/gpu_tests.log 2>&1; echo "gpu tests s36 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_s36 \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:GpuQsa.SelectionMatchesCpuWithEightIndexHeads:*Golden*/ple_qsa' \
  > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.log
for v in sb4 st64 st32 st64b8 st64r80; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='GpuQsa.*' > $R/tests_$v.txt 2>&1
  echo "GpuQsa $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_$v.txt | head -4
done
for v in st64 st32; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 60 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context 32768 --runs 1 --out "$R/tl_${v}_32768.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_${v}_32768.txt" 2>&1; rm -f "$OUT/tl.csv"
  echo "== timeline $v 32768"; head -1 "$R/tl_${v}_32768.txt"; grep -E "^  attention" "$R/tl_${v}_32768.txt"
  sed -n '/first 150/,$p' "$R/tl_${v}_32768.txt" | grep -B3 -A6 -m1 qsa_prep_score
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
