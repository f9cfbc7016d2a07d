#!/usr/bin/env bash
# Session 33, visit 5: gu2 (session33_gate_up_two_barriers.patch: the gate/up batch's bulk copies on two mbarriers,
# the first half of the supertiles computed while the second lands) and qw (session33_qsa_select_whole_digit.patch:
# the QSA cluster selection stops after the pass whose digit is kept whole). Their tests, then A/B/C against the tree,
# tg 128 at 1K / 32K, two alternated rounds. Carry build/carry.tar.xz (build/exp/imp_{base,gu2,qw},
# imp_gpu_tests_{gu2,qw}, build/cuda/bin/lib).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 120 build/exp/imp_gpu_tests_gu2 --gtest_filter='*Moe*:GpuKernels.Expert*:*Golden*' > $R/tests_gu2.txt 2>&1
echo "tests gu2 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_gu2.txt | head
timeout 120 build/exp/imp_gpu_tests_qw --gtest_filter='GpuQsa.*:*Golden*/ple_qsa:GpuAttention*' > $R/tests_qw.txt 2>&1
echo "tests qw rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_qw.txt | head
cfg=bench/configs/qwen3.8-flash-next.json
for i in 1 2; do for v in base gu2 qw; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 100 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 1 --tg 128 --context 1024,32768 --runs 5 --out $R/${v}_$i.json > /dev/null 2> $R/${v}_$i.log
  echo "$v$i rc=$?: $(grep -E 'tg ' $R/${v}_$i.log | cut -c12-90 | tr '\n' ' ')"
done; done
tar -czf $OUT/visit5.tar.gz -C $R . && rm -rf $R
