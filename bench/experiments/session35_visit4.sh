#!/usr/bin/env bash
# Session 35, visit 4: ib (session35_qsa_index_branch.patch): the QSA indexer's in-projection rows (640 x 2560), its
# prep (index query norm + RoPE, raw key append, block key), the scores and the selection on a side branch at high
# priority, forked where the gate branch is and joined before the attention partial kernel; the main chain keeps the
# q / k / v rows and their prep. At 32K (2026-12-02_decode_timeline_32k_fa57d0c.txt) the chain after the in-projection
# is prep 4.4 + scores 5.7 + selection 9.0 us before the attention; the branch can hide most of it behind the
# in-projection. The partial kernel then loads its queries after its wait (no early loads: its predecessor on the
# main chain is the prep kernel, which does not finish before it launches).
# Tests of ib (attention, QSA, golden), A/B against base35 (fa57d0c's kernels) at 1K / 32K, two rounds, and a 32K
# timeline of ib.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 150 build/exp/imp_gpu_tests_ib --gtest_filter='GpuAttention*:GpuQsa.*:GpuDecodeFused.*:*Golden*' > $R/tests_ib.txt 2>&1
echo "tests ib rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/tests_ib.txt | head -14
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
OUT=$OUT/ab VARIANTS="base35 ib" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" timeout 100 build/exp/imp_ib bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
  --pp 1 --tg 24 --context 32768 --runs 1 --out "$OUT/tl_ib.json" > /dev/null 2>&1
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 > "$OUT/tl_ib_32k.txt" 2>&1; rm -f "$OUT/tl.csv"
head -1 "$OUT/tl_ib_32k.txt"; grep -A4 "^half-layers" "$OUT/tl_ib_32k.txt" | cut -c1-400
