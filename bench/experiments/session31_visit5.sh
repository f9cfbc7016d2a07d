# Session 31, visit 5: the hc write/norm/split row kernel with one quad per thread and stream (640 threads at the
# released shape, two blocks per SM: 40 warps instead of 16; hcw640) against 1d62d7b (main3): golden and
# hyper-connection tests (the fused kernel's bit-for-bit comparison with launch_rms_norm, which sums with 256
# threads, is expected to differ in the last bits), pp 4096 in three alternated rounds.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 60 build/exp/imp_gpu_tests_hcw640 --gtest_filter='GpuHyperConnection.*:*Golden*' > $OUT/tests_hcw640.txt 2>&1; echo "hcw640 tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda|streams|split terms" $OUT/tests_hcw640.txt | head -16
cfg=bench/configs/qwen3.8-flash-next.json
for v in main3 hcw640 hcw640 main3 main3 hcw640; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done
