#!/usr/bin/env bash
# Prepared in session 33 for the next visit: the GDN recurrent step's and the attention prep kernel's shared memory
# sized by the shape instead of static arrays for the largest one (16.6 -> ~3 KB and 32 -> 16 KB per block at the
# released shape; session34_gdn_recurrent_shared_by_shape.patch + session34_attention_prep_shared_by_shape.patch,
# built as small_smem; compiled, not yet run). Both kernels are off the critical path at 1K, so this asks whether
# their footprint costs their neighbours (as the read-down's 61 KB cost 1.8%, session 33). And qreg
# (session34_attention_partial_queries_in_registers.patch: the tensor-core attention partial kernel keeps its warps'
# query A fragments in registers instead of a shared copy read by ldmatrix, 43 -> 26 KB per block, 92 -> 96
# registers, no spill; the same MMAs on the same values; compiled, not yet run). Their tests, then A/B/C against
# the tree (base = 9a39ebd's kernels), tg 128 at 1K / 32K, two rounds.
# Build: bench/tools/build_variant.sh - base && bench/tools/build_variant.sh \
#   bench/experiments/session34_gdn_recurrent_shared_by_shape.patch+bench/experiments/session34_attention_prep_shared_by_shape.patch small_smem
#   && bench/tools/build_variant.sh bench/experiments/session34_attention_partial_queries_in_registers.patch qreg
# Carry build/carry.tar.xz (build/exp/imp_{base,small_smem,qreg}, imp_gpu_tests_{small_smem,qreg}, build/cuda/bin/lib).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 150 build/exp/imp_gpu_tests_small_smem --gtest_filter='GpuGatedDeltaNet.*:GpuAttention*:GpuQsa.*:GpuDecodeFused.*:*Golden*' > $R/tests_small_smem.txt 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_small_smem.txt | head
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_small_smem \
  --gtest_filter='GpuGatedDeltaNet.DecodeStep*:*Golden*/ple_qsa' > $R/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.txt
timeout 120 build/exp/imp_gpu_tests_qreg --gtest_filter='GpuAttention*:GpuQsa.*:*Golden*' > $R/tests_qreg.txt 2>&1
echo "tests qreg rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_qreg.txt | head
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_qreg \
  --gtest_filter='GpuAttention*:*Golden*/ple_qsa' > $R/memcheck_qreg.txt 2>&1; echo "memcheck qreg rc=$?"; tail -1 $R/memcheck_qreg.txt
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base small_smem qreg" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
