#!/usr/bin/env bash
# Session 36, visit 3:
# - graph_edge_probe again, with a case using launch priorities and cudaGraphInstantiateFlagUseNodePriority as the
#   decode graph does (visit 2: without priorities both edges into the joined kernel were programmatic and it
#   started early; in the decode timelines the attention output projection and the attention partial kernel both
#   start only after their main-chain predecessor ends);
# - A/B (1K / 32K, two rounds): t36 (eae1c87, the QSA prep in the score kernel, committed), fs2 (the same kernels
#   before the prep kernel's index tasks were removed), and on fs2's tree ga / gb / gc
#   (session36_attention_gate_join_{ga,gb,gc}.patch: the attention layer's gate branch joined before the partial
#   kernel after the QSA join / on the QSA branch after the selection / before the QSA join, so that the output
#   projection has one incoming edge, the combine kernel's);
# - the whole GPU suite of t36, memcheck on its QSA decode tests, the prep tests and golden ple_qsa / long_sparse;
# - decode timelines: t36 at 32K and 1K, ga / gb / gc at 32K.
# Carry build/carry.tar.xz: build/exp/imp_{t36,fs2,ga,gb,gc}{,.label}, build/exp/imp_gpu_tests_t36,
# build/exp/graph_edge_probe, build/exp/{libkernel_timeline.so,lib}, build/cuda/bin/lib.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 30 build/exp/graph_edge_probe 2>&1 | tee $R/graph_edge_probe.txt
OUT=$OUT/ab VARIANTS="t36 fs2 ga gb gc" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
timeout 200 build/exp/imp_gpu_tests_t36 > $R/gpu_tests_t36.log 2>&1; echo "gpu tests t36 rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/gpu_tests_t36.log | tail -12
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_t36 \
  --gtest_filter='GpuQsa.SelectionMatchesCpuAtReleasedShapes:GpuQsa.SelectionMatchesCpuWithManyTies:GpuAttentionDecodePrep.*:*Golden*/ple_qsa:*Golden*/long_sparse' \
  > $R/memcheck_t36.log 2>&1; echo "memcheck t36 rc=$?"; tail -1 $R/memcheck_t36.log
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R && mkdir -p $R
for run in t36:32768 ga:32768 gc:32768 gb:32768 t36:1024; do
  v=${run%:*} ctx=${run#*:}
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 60 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context $ctx --runs 1 --out "$R/tl_${v}_$ctx.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_${v}_$ctx.txt" 2>&1; rm -f "$OUT/tl.csv"
  echo "== timeline $v $ctx"; head -1 "$R/tl_${v}_$ctx.txt"
  tar -czf $OUT/timelines.tar.gz -C $R .
done
