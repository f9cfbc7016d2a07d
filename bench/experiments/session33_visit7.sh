#!/usr/bin/env bash
# Session 33, visit 7: rd (session33_hc_read_down_stream_in_registers.patch: the read-down loads its stream values
# into registers instead of staging the stream in shared memory, 61 -> 20 KB per block, 110 -> 149 registers): its
# hyper-connection, fused-decode and golden tests, then A/B against 8ee265c, tg 128 at 1K / 32K, two rounds.
# Carry build/carry.tar.xz (build/exp/imp_{base8,rd}, imp_gpu_tests_rd, build/cuda/bin/lib).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 100 build/exp/imp_gpu_tests_rd --gtest_filter='GpuHyperConnection*:GpuDecodeFused.*:*Golden*' > $R/tests_rd.txt 2>&1
echo "tests rd rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_rd.txt | head
cfg=bench/configs/qwen3.8-flash-next.json
for i in 1 2; do for v in base8 rd; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 100 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 1 --tg 128 --context 1024,32768 --runs 5 --out $R/${v}_$i.json > /dev/null 2> $R/${v}_$i.log
  echo "$v$i rc=$?: $(grep -E 'tg ' $R/${v}_$i.log | cut -c12-90 | tr '\n' ' ')"
done; done
tar -czf $OUT/visit7.tar.gz -C $R . && rm -rf $R
