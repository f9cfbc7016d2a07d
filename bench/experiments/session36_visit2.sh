#!/usr/bin/env bash
# Session 36, visit 2:
# - graph_edge_probe: which edges a PDL launch after a cross-stream join gets in the capture (the attention layers'
#   output projection starts only after the combine ends in every timeline), and whether rewriting the stream's
#   dependencies to programmatic edges lets it start early;
# - A/B (1K / 32K, two rounds) of f7d6b01 (the tree) against pa (session36_programmatic_attention_joins.patch: the
#   attention layer's QSA index join and gate join programmatic), pg (session36_programmatic_joins.patch: every branch
#   join programmatic, the GDN's gate join and the PLE join too; session 14 had measured the GDN's alone at -0.14%)
#   and fs2 (session36_qsa_prep_in_scores_short_exit.patch: session 35's fs with the score blocks leaving at once when
#   no score is needed, i.e. contexts within the budget: fs lost 0.5% at 1K, gained 0.4% at 32K in visit 1);
# - decode timelines: f7d6b01 at 32K, pa at 1K and 32K;
# - tests: pa and pg (fused decode + golden, memcheck of pg on golden ple_qsa), fs2 (QSA, attention, golden, memcheck).
# Carry build/carry.tar.xz: build/exp/imp_{f7d6b01,pa,pg,fs2}{,.label}, build/exp/imp_gpu_tests_{pa,pg,fs2},
# build/exp/graph_edge_probe, build/exp/{libkernel_timeline.so,lib}, build/cuda/bin/lib.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 30 build/exp/graph_edge_probe 2>&1 | tee $R/graph_edge_probe.txt
OUT=$OUT/ab VARIANTS="f7d6b01 pa pg fs2" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
for run in f7d6b01:32768 pa:32768 pa:1024; do
  v=${run%:*} ctx=${run#*:}
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$OUT/tl.csv" timeout 120 build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 1 --tg 24 --context $ctx --runs 1 --out "$R/tl_${v}_$ctx.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --steps 16 --detail 150 --segments > "$R/tl_${v}_$ctx.txt" 2>&1; rm -f "$OUT/tl.csv"
  echo "== timeline $v $ctx"; head -1 "$R/tl_${v}_$ctx.txt"
done
for v in pa pg; do
  timeout 120 build/exp/imp_gpu_tests_$v --gtest_filter='GpuDecodeFused.*:*Golden*' > $R/tests_$v.txt 2>&1
  echo "tests $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda.*(ple_qsa|long_sparse)" $R/tests_$v.txt | head -6
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_pg \
  --gtest_filter='GpuDecodeFused.*:*Golden*/ple_qsa' > $R/memcheck_pg.log 2>&1; echo "memcheck pg rc=$?"; tail -1 $R/memcheck_pg.log
timeout 120 build/exp/imp_gpu_tests_fs2 --gtest_filter='GpuQsa.*:GpuAttention*:*Golden*' > $R/tests_fs2.txt 2>&1
echo "tests fs2 rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda.*(ple_qsa|long_sparse)" $R/tests_fs2.txt | head -6
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_fs2 \
  --gtest_filter='*Golden*/ple_qsa:*Golden*/long_sparse' > $R/memcheck_fs2.log 2>&1; echo "memcheck fs2 rc=$?"; tail -1 $R/memcheck_fs2.log
tar -czf $OUT/tests.tar.gz -C $R . && rm -rf $R
