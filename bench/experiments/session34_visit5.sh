#!/usr/bin/env bash
# Session 34, visit 5 (the last 4 minutes of device time): rs = session34_gdn_recurrent_one_barrier.patch (the GDN
# recurrent step normalises q and k through their totals, so one block barrier brings every partial sum together,
# and the gated RMSNorm's block sums go to every block of the cluster before one cluster barrier: 5 block + 2 cluster
# barriers after the wait -> 1 + 1 (+ an early split arrive); 64 registers, no spill, 16.6 -> 8.7 KB of shared
# memory); rsz1 = rs + session34_gdn_z_front.patch with kGdnZFrontEighths = 1 (visit 3: the z split lost because the
# recurrent step, not the gate, then ends last). The GDN tests, then tg 128 at 1K / 32K against base34, two rounds,
# then golden of rsz1.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 30 build/exp/imp_gpu_tests_rsz1 --gtest_filter='GpuGatedDeltaNet.*:GpuDecodeFused.*' > $R/tests_rsz1.txt 2>&1
echo "tests rsz1 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_rsz1.txt | head -5
OUT=$OUT/ab VARIANTS="base34 rs rsz1" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
timeout 40 build/exp/imp_gpu_tests_rsz1 --gtest_filter='*Golden*' > $R/golden_rsz1.txt 2>&1
echo "golden rsz1 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/golden_rsz1.txt | head -3
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
