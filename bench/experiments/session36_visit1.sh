#!/usr/bin/env bash
# Prepared in session 35 for the next session's first visit:
# - f7d6b01 (the attention partial kernels without their early-load path; compiled, not run) validated: the whole
#   GPU suite (116 tests: the three early-load attention tests became two full-selection ones) and memcheck on the
#   attention tests, golden ple_qsa and long_sparse;
# - rb (session35_gdn_recurrent_branch.patch, on f7d6b01; compiled, not run): in a GDN layer the in-projection alone
#   first, then act(z) on the main chain (PDL: its first weights fetched during in_proj's tail) and the recurrent
#   step on the top-priority side branch (the QSA index branch's stream), joined before the output projection. The
#   fa57d0c timeline has the low-priority z GEMV starved while in_proj runs and ending 2.8-4 us after the recurrent
#   step; session 13's orders without priorities lost (the recurrent step's loads queue behind z's), session 35's
#   QSA branch gained once it had the highest priority. Its GDN, fused-decode and golden tests and memcheck;
# - fs (session35_qsa_prep_in_scores.patch, on f7d6b01; compiled, not run): the QSA branch's index prep folded into
#   the score kernel (every block normalises and rotates the index queries into shared memory with the prep
#   kernel's function; block 0 appends the raw key and writes and scores the newest block key): one boundary less on
#   the branch, which at 32K probably still ends after the main chain's prep. Its QSA, attention and golden tests
#   and memcheck (the selection must stay bit-identical: golden unchanged). If kept, it still needs its own GpuQsa
#   test against cpu::qsa_select (raw queries in, the completing and mid-block positions), and the prep kernel's
#   index tasks, then unused by decode, removed with their test;
# - A/B of f884e23 (the last measured tree), f7d6b01, rb and fs at 1K / 32K, two rounds.
# Build on f7d6b01's tree: bench/tools/build_variant.sh - f7d6b01 && bench/tools/build_variant.sh
#   bench/experiments/session35_gdn_recurrent_branch.patch rb && bench/tools/build_variant.sh
#   bench/experiments/session35_qsa_prep_in_scores.patch fs; f884e23 in a git worktree (its own build dir):
#   build/exp/imp_f884e23. Carry build/carry.tar.xz (build/exp/imp_{f884e23,f7d6b01,rb,fs}{,.label},
#   build/exp/imp_gpu_tests_{f7d6b01,rb,fs}, build/cuda/bin/lib).
# Session 35 left these built in build/exp (imp_f884e23 from a worktree of f884e23; imp_f7d6b01, imp_rb and imp_fs from
# the tree at c44d99d, whose src is f7d6b01's; their imp_gpu_tests_* beside them), if that folder is still there.
# Packed as build/carry_session36.tar.xz: carry it and run `tar -xJf build/carry_session36.tar.xz && timeout 590 bash bench/experiments/session36_visit1.sh`.
# About 8-9 minutes in all (the per-call limit is 10): run the A/B in a second call if the tests take longer.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/exp/imp_gpu_tests_f7d6b01 > $R/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests.log | tail -12
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_f7d6b01 \
  --gtest_filter='GpuAttention*:*Golden*/ple_qsa:*Golden*/long_sparse' > $R/memcheck.log 2>&1; echo "memcheck rc=$?"; tail -1 $R/memcheck.log
timeout 150 build/exp/imp_gpu_tests_rb --gtest_filter='GpuGatedDeltaNet.*:GpuDecodeFused.*:*Golden*' > $R/tests_rb.txt 2>&1
echo "tests rb rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_rb.txt | head -4
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_rb \
  --gtest_filter='GpuDecodeFused.*:*Golden*/ple_qsa' > $R/memcheck_rb.log 2>&1; echo "memcheck rb rc=$?"; tail -1 $R/memcheck_rb.log
timeout 150 build/exp/imp_gpu_tests_fs --gtest_filter='GpuQsa.*:GpuAttention*:*Golden*' > $R/tests_fs.txt 2>&1
echo "tests fs rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda.*(ple_qsa|long_sparse)" $R/tests_fs.txt | head -6
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_fs \
  --gtest_filter='*Golden*/ple_qsa:*Golden*/long_sparse' > $R/memcheck_fs.log 2>&1; echo "memcheck fs rc=$?"; tail -1 $R/memcheck_fs.log
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="f884e23 f7d6b01 rb fs" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
