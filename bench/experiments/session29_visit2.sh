export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name --format=csv,noheader
F='*GatedDeltaNet*:*Golden*'
timeout 200 build/exp/imp_gpu_tests_outc --gtest_filter="$F" > $OUT/tests_outc.txt 2>&1; echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|max|error" $OUT/tests_outc.txt | head -30
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 build/exp/imp_gpu_tests_outc --gtest_filter='GpuGatedDeltaNetPrefill.*' > $OUT/memcheck_outc.txt 2>&1; echo "memcheck rc=$?"; tail -3 $OUT/memcheck_outc.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 build/exp/imp_gpu_tests_outc --gtest_filter='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes' > $OUT/racecheck_outc.txt 2>&1; echo "racecheck rc=$?"; tail -3 $OUT/racecheck_outc.txt
for p in gdn_scan_phase_probe gdn_probe_outc; do ./build/exp/$p > $OUT/$p.txt 2>&1; echo "$p: $(head -1 $OUT/$p.txt)"; done
VARIANTS="base outc" TL_PATTERN='^(chunk_|steps)' bash bench/tools/variants_visit.sh
