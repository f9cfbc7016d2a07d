#!/usr/bin/env bash
# Session 36, visit 5: the committed tree (815c4d8: the QSA prep in the score kernel + the capture order at branch
# joins) validated: the whole GPU suite, memcheck on the fused-decode, QSA-decode and golden ple_qsa tests, and imp
# bench at 1K / 32K with the tree's binary. Carry build/carry.tar.xz: build/cuda/bin/{imp,lib},
# build/cuda/tests/imp_gpu_tests.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 180 build/cuda/tests/imp_gpu_tests > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
IMP_COMMIT=815c4d8 timeout 100 build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
  --pp 1 --tg 128 --context 1024,32768 --runs 5 --out $R/bench.json > /dev/null 2> $R/bench.log
echo "bench rc=$?"; grep -E "tg |roofline" $R/bench.log
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/cuda/tests/imp_gpu_tests \
  --gtest_filter='GpuDecodeFused.*:GpuQsa.SelectionMatchesCpuAtReleasedShapes:*Golden*/ple_qsa' > $R/memcheck.log 2>&1
echo "memcheck rc=$?"; tail -1 $R/memcheck.log
tar -czf $OUT/visit5.tar.gz -C $R . && rm -rf $R
