# Prepared in session 31 for the next visit (not run). Build first:
#   bench/tools/build_variant.sh - main4          (the tree: 0cc99a5's code)
#   bench/tools/build_variant.sh bench/experiments/session31_hc_write_one_barrier_less.patch hcwb
# and carry build/cuda (bin/imp, tests/imp_gpu_tests, bin/lib) and build/exp (imp_main4, imp_hcwb, imp_gpu_tests_hcwb,
# labels). hcwb: the hc write/norm/split row kernel without its second block barrier (every warp sums the warps'
# partials for the inverses itself, the same bits; the inject logits in their own partials).
# 1. The full GPU suite on the tree (0cc99a5's revised FusedWriteNormSplitMatchesTheSeparateKernels has not run).
# 2. hcwb's hyper-connection and golden tests, then pp 4096 A/B against main4 in three alternated rounds.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/cuda/tests/imp_gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|split terms" $OUT/gpu_tests.log | head -8
timeout 60 build/exp/imp_gpu_tests_hcwb --gtest_filter='GpuHyperConnection.*:*Golden*' > $OUT/tests_hcwb.txt 2>&1; echo "hcwb tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_hcwb.txt | head -4
cfg=bench/configs/qwen3.8-flash-next.json
for v in main4 hcwb hcwb main4 main4 hcwb; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done
tar -czf $OUT/next.tar.gz -C $OUT --exclude=next.tar.gz . 2>/dev/null
