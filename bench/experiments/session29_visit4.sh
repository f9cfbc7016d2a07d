export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
F='*GatedDeltaNet*:*Golden*'
timeout 200 build/exp/imp_gpu_tests_prep2 --gtest_filter="$F" > $OUT/tests_prep2.txt 2>&1; echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda|error|rel" $OUT/tests_prep2.txt | head -40
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_prep2 --gtest_filter='GpuGatedDeltaNetPrefill.*' > $OUT/memcheck_prep2.txt 2>&1; echo "memcheck rc=$?"; tail -2 $OUT/memcheck_prep2.txt
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 3 build/exp/imp_gpu_tests_prep2 --gtest_filter='GpuGatedDeltaNetPrefill.*' > $OUT/racecheck_prep2.txt 2>&1; echo "racecheck rc=$?"; tail -2 $OUT/racecheck_prep2.txt
for p in gdn_probe_base2 gdn_probe_prep2; do ./build/exp/$p > $OUT/$p.txt 2>&1; echo "== $p"; head -1 $OUT/$p.txt; grep prep $OUT/$p.txt; done
VARIANTS="base2 prep2" TL_PATTERN='^(chunk_|steps)' bash bench/tools/variants_visit.sh
