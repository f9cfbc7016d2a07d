#!/usr/bin/env bash
# Session 36, visit 4: which predecessor's edge a two-predecessor kernel keeps programmatic in the decode graph.
# Visit 3's timelines: the attention output projection (predecessors: the combine kernel, the gate branch's GEMV)
# starts only after the combine ends although the gate GEMV ended long before; joining the gate branch before the
# partial kernel instead (ga/gb/gc) made the projection start 4.5 us before the combine's end, but the partial kernel
# (now three predecessors) lost its early start: -0.25% at 1K, +0.17% at 32K. The guess tested here: such a kernel
# follows the predecessor captured first, and the other edge waits for its end. og (session36_attention_capture_order_og.patch):
# the gate GEMV captured after the combine (its fork still right after the read), so the projection's first-captured
# predecessor is the combine; ob (kept as 815c4d8, its patch removed): og plus the QSA branch captured after the main chain's GEMV and
# prep, so the partial kernel's first-captured predecessor is the prep.
# A/B t36 / og / ob at 1K and 32K, two rounds; decode and golden tests of og and ob; timelines of ob.
# Carry build/carry.tar.xz: build/exp/imp_{t36,og,ob}{,.label}, build/exp/imp_gpu_tests_{og,ob},
# build/exp/{libkernel_timeline.so,lib}, build/cuda/bin/lib.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
OUT=$OUT/ab VARIANTS="t36 og ob" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
for v in og ob; do
  timeout 100 build/exp/imp_gpu_tests_$v --gtest_filter='GpuDecodeFused.*:*Golden*' > $R/tests_$v.txt 2>&1
  echo "tests $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda.*(ple_qsa|long_sparse)" $R/tests_$v.txt | head -6
done
for run in ob:32768 ob:1024 og:32768; do
  v=${run%:*} ctx=${run#*:}
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 60 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context $ctx --runs 1 --out "$R/tl_${v}_$ctx.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_${v}_$ctx.txt" 2>&1; rm -f "$OUT/tl.csv"
  echo "== timeline $v $ctx"; head -1 "$R/tl_${v}_$ctx.txt"; grep "attention x" "$R/tl_${v}_$ctx.txt"
  grep -A8 "without_gates_kernel$" "$R/tl_${v}_$ctx.txt" | head -9
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
