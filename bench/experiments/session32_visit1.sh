# Session 32, visit 1. Build first:
#   bench/tools/build_variant.sh - main4
#   bench/tools/build_variant.sh bench/experiments/session31_hc_write_one_barrier_less.patch hcwb
#   bench/tools/build_variant.sh bench/experiments/session32_upmix_split_helper.patch upsh
# and carry build/cuda (bin/imp, tests/imp_gpu_tests, bin/lib) and build/exp (imp_main4, imp_hcwb, imp_upsh,
# imp_gpu_tests_hcwb, imp_gpu_tests_upsh, labels).
# 1. The full GPU suite on the tree (0cc99a5's revised FusedWriteNormSplitMatchesTheSeparateKernels has not run).
# 2. hcwb's and upsh's hyper-connection and golden tests, then pp 4096 A/B against main4 in three alternated rounds.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/cuda/tests/imp_gpu_tests > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|split terms" $OUT/gpu_tests.log | head -8
for v in hcwb upsh; do
  timeout 60 build/exp/imp_gpu_tests_$v --gtest_filter='GpuHyperConnection.*:*Golden*' > $OUT/tests_$v.txt 2>&1; echo "$v tests rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_$v.txt | head -4
done
cfg=bench/configs/qwen3.8-flash-next.json
for v in main4 hcwb upsh upsh hcwb main4 main4 upsh hcwb; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done
tar -czf $OUT/visit1.tar.gz -C $OUT --exclude=visit1.tar.gz . 2>/dev/null
