#!/usr/bin/env bash
# Session 35, visit 2: resident blocks of the decode GEMVs and the read's up/mix (the GEMVs are bound by how many
# blocks are resident, gemv_row.cuh). Register caps, no change to any result:
# - ip12 (session35_in_proj_12_blocks.patch): the GDN in-projection + conv at 40 registers (48: 10 -> 12 blocks per SM);
# - hw12 (session35_hc_write_12_blocks.patch): the output projection into the streams at 40 (46: 10 -> 12);
# - iphw12: both;
# - um48 (session35_up_mix_48_registers.patch): the read's up/mix at 48 registers (64) with 5 loads per lane in a
#   batch instead of 8 (5 are used at the released shape): two of its blocks fit beside a read-down block
#   (149 registers) instead of one, so all 320 can be resident before the read-down ends;
# - rd128 (session35_read_down_128_registers.patch): the read-down at 128 registers (149, 64 bytes spilled), so that
#   it fits beside one MoE down block (56 x 576 threads) and can become resident before down ends;
# - comb: ip12 + hw12 + um48.
# base35 = fa57d0c's kernels (b73da54). Tests of comb (its kernels' and the golden ones), then tg 128 at 1K / 32K,
# two rounds.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 150 build/exp/imp_gpu_tests_comb --gtest_filter='GpuHyperConnection.*:GpuGatedDeltaNet.*:GpuKernels.*:GpuDecodeFused.*:*Golden*' > $R/tests_comb.txt 2>&1
echo "tests comb rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_comb.txt | head
timeout 60 build/exp/imp_gpu_tests_rd128 --gtest_filter='GpuHyperConnection.*:*Golden*/ple_qsa' > $R/tests_rd128.txt 2>&1
echo "tests rd128 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_rd128.txt | head -4
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base35 ip12 hw12 iphw12 um48 rd128 comb" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
