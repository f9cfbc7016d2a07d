export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/exp/imp_gpu_tests_mx > $OUT/tests_mx.txt 2>&1; echo "tests mx rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $OUT/tests_mx.txt | cut -c1-140 | head -20
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_mx --gtest_filter='GpuHyperConnection.*:*Golden*/nvfp4' > $OUT/memcheck_mx.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/memcheck_mx.txt
VARIANTS="base4 mx" TL_PATTERN='^(hc_|steps)' bash bench/tools/variants_visit.sh
