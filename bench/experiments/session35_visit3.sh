#!/usr/bin/env bash
# Session 35, visit 3: single-wave decode kernels capped at their share of blocks per SM. Visit 2's register caps lost
# (hw12 -1.6%, um48 -2.0%, rd128 -4.3%): each let more of a one-wave grid's blocks onto one SM (rd128: two read-down
# blocks where one fit), so the SM that takes the most blocks ends last. These go the other way, through unused
# dynamic shared memory (no change to any result):
# - gb (session35_gemv_balanced_cap.patch): the bf16 GEMVs of one wave (the MoE input: 897 blocks, 9 per SM by
#   registers) at ceil(blocks / SMs) = 7 per SM;
# - um3 (session35_up_mix_three_per_sm.patch): the read's up/mix (320 blocks, 4 per SM by registers) at 3;
# - ap1 (session35_attention_partial_one_per_sm.patch): the attention partial (132 blocks, 2 per SM) at 1;
# - cb1 (session35_attention_combine_one_per_sm.patch): the attention combine (96 blocks, 6 per SM) at 1;
# - bal: gb + um3 + ap1.
# base35 = fa57d0c's kernels (b73da54). Tests of bal and cb1, then tg 128 at 1K / 32K, two rounds.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 150 build/exp/imp_gpu_tests_bal --gtest_filter='GpuHyperConnection.*:GpuAttention*:GpuKernels.*:GpuQsa.*:*Golden*' > $R/tests_bal.txt 2>&1
echo "tests bal rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_bal.txt | head
timeout 60 build/exp/imp_gpu_tests_cb1 --gtest_filter='GpuAttention*:*Golden*/ple_qsa' > $R/tests_cb1.txt 2>&1
echo "tests cb1 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_cb1.txt | head -4
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base35 gb um3 ap1 cb1 bal" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
