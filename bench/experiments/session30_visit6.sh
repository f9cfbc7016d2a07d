# Session 30, visit 6: the one-ring form as committed (the hyper-connection tests, the golden fixtures through the
# fused up/mix path, memcheck of its test).
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
t=build/cuda/tests/imp_gpu_tests
timeout 120 $t --gtest_filter='GpuHyperConnection.*:*Golden*' > $OUT/tests.txt 2>&1; echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|Failure|golden-cuda" $OUT/tests.txt | head -12
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='GpuHyperConnection.UpMix*:*Golden*/ple_qsa' > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -1 $OUT/memcheck.txt
