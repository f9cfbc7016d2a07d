#!/usr/bin/env bash
# Prepared in session 36 for the next session's first visit:
# - the final tree of session 36 (s36 = 3ba2459: 815c4d8 + the QSA selection's launch factored into one helper and
#   the decode score kernel taking 8 index heads again, with a GpuQsa case for them; made after the last visit): the
#   whole GPU suite and memcheck on the QSA decode and golden ple_qsa tests;
# - A/B (1K / 32K, two rounds) of s36 against
#   ple = session36_ple_capture_order.patch: the first PLE layer's token half captured just before its join (forked at
#         the step's start as before), so the stream half starts early behind the main chain (the timelines show it
#         2.2 us after its predecessor's end);
#   gdo = session36_gdn_gate_capture_order.patch: GDN's gate GEMV captured after the recurrent step, which by
#         session 36's reading makes the output projection follow the recurrent step and wait for the gate's end
#         (~3 us later): expected slower; it tests the reading on the GDN join;
#   sb4 = session36_qsa_score_batch_4.patch: the QSA score kernels load 4 block keys per warp in a batch instead of 8
#         (the decode one 109 -> 80 registers: its 128 blocks sit on the SMs beside the main in-projection GEMV at
#         the highest priority; at 32K a second batch after the wait);
#   sc64 = session36_qsa_score_64_blocks.patch: the score kernels on 64 blocks instead of 128 (16 keys per warp at
#         32K, in two batches);
#   (docs/cuda_engine.md, Next steps 1 (d): the 32K in-projection GEMV ends 4.6 us later than at 1K);
# - a 32K timeline of ple.
# Build (session 36 left them in build/exp if that folder is still there): bench/tools/build_variant.sh - s36,
#   bench/tools/build_variant.sh bench/experiments/session36_ple_capture_order.patch ple,
#   bench/tools/build_variant.sh bench/experiments/session36_gdn_gate_capture_order.patch gdo, and sb4 / sc64 from
#   their patches. Carry build/carry.tar.xz: build/exp/imp_{s36,ple,gdo,sb4,sc64}{,.label}, build/exp/imp_gpu_tests_s36,
#   build/exp/imp_gpu_tests_{sb4,sc64} (their GpuQsa tests run here too), build/exp/{libkernel_timeline.so,lib},
#   build/cuda/bin/lib. About 7 minutes. Session 36 packed all of it as build/carry_session37.tar.xz: carry it and run
#   `tar -xJf build/carry_session37.tar.xz && timeout 590 bash bench/experiments/session37_visit1.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=$OUT/ab VARIANTS="s36 ple gdo sb4 sc64" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
timeout 180 build/exp/imp_gpu_tests_s36 > $R/gpu_tests.log 2>&1; echo "gpu tests s36 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_s36 \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuBeyondTheCluster:*Golden*/ple_qsa' \
  > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.log
for v in sb4 sc64; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='GpuQsa.*' > $R/tests_$v.txt 2>&1
  echo "GpuQsa $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_$v.txt | head -4
done
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 60 build/exp/imp_ple bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$R/tl_ple_32768.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_ple_32768.txt" 2>&1; rm -f "$OUT/tl.csv"
echo "== timeline ple 32768"; head -1 "$R/tl_ple_32768.txt"; sed -n '/first 150/,$p' "$R/tl_ple_32768.txt" | sed -n 2,24p
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
