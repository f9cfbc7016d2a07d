export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in p3 p4; do timeout 200 build/exp/imp_gpu_tests_$v --gtest_filter='*GatedDeltaNet*:*Golden*' > $OUT/tests_$v.txt 2>&1; echo "tests $v rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_$v.txt | head -5; grep "gdn prefill" $OUT/tests_$v.txt | awk '{for(i=1;i<=NF;i++){if($i=="y")y=$(i+1); if($i=="state")s=$(i+1)}; if(y>my)my=y; if(s>ms)ms=s} END{print "max y",my,"max state",ms}'; done
for p in base3 p3 p4; do ./build/exp/gdn_probe_$p > $OUT/probe_$p.txt 2>&1; echo "== $p"; head -1 $OUT/probe_$p.txt; grep prep $OUT/probe_$p.txt | head -7; done
VARIANTS="base3 p3 p4" TL_VARIANTS="base3 p4" TL_PATTERN='^(chunk_|steps)' bash bench/tools/variants_visit.sh
