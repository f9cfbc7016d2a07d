#!/usr/bin/env bash
# Session 34, visit 3: more weight loads per lane in the GEMVs that start without an early (PDL) launch. Visit 2's
# 1K timeline (base34) has the GDN output projection (gemv_bf16_hc_write, 2560 x 6144, 31.5 MB, launched after the
# gate branch's event join, so nothing is loaded before its start) at 14.0 us (2.25 TB/s) against 8.1 us alone, and the
# low-priority gate GEMV at 19.7 us: each warp has 2 loads per lane in flight and 6 (out proj) sequential round trips.
# - ob3 / ob4 (session34_hc_write_batch.patch with kHcWriteBatch = 3 / 4): the hc_write GEMV with 3 / 4 loads per lane (46 -> 48 / 54
#   registers: 10 / 9 blocks per SM; the GDN projection's 1280 blocks fit one wave at 10).
# - gb4 (session34_gate_gemv_batch_4.patch): the gate GEMVs (GDN act(z), attention gate halves) with 4 per lane.
# - ob4gb4: both.
# Golden of ob4gb4, then tg 128 at 1K / 32K, two rounds against base34 (c34c014).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 60 build/exp/imp_gpu_tests_ob4gb4 --gtest_filter='*Golden*:GpuKernels.*:GpuDecodeFused.*' > $R/tests_ob4gb4.txt 2>&1
echo "tests ob4gb4 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $R/tests_ob4gb4.txt | head -3
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base34 ob3 ob4 gb4 ob4gb4" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
