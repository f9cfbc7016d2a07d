#!/usr/bin/env bash
# Session 33, visit 6: the tree (8ee265c: the QSA cluster selection's whole-digit stop) in full: scripts/gpu_visit.sh
# (GPU suite, bench pp 512/4096/16384 + tg 128 at 1K/32K, memcheck incl. the QSA suite, generate), then a CUPTI
# decode timeline at 32K. Carry build/carry.tar.xz (build/cuda/bin/imp, build/cuda/tests/imp_gpu_tests,
# build/cuda/bin/lib, build/exp/libkernel_timeline.so, build/exp/lib).
R=$OUT/raw; mkdir -p $R
OUT=$R IMP_COMMIT=8ee265c SERVER=0 \
  MEMCHECK_FILTER='GpuQsa.*:*Golden*/ple_qsa:*Golden*/nvfp4:GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes:*MoePrefill*Tiny*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" timeout 400 bash scripts/gpu_visit.sh > $R/visit.log 2>&1
echo "gpu_visit rc=$?"; grep -E "rc=|pp |tg |roofline|FAILED|PASSED|golden-cuda|ERROR SUMMARY" $R/visit.log | head -40
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:$PWD/build/exp/lib"
CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" IMP_TIMELINE="$R/tl.csv" timeout 90 build/cuda/bin/imp bench \
  --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 1 --tg 24 --context 32768 --runs 1 --out $R/tl.json > /dev/null 2> $R/tl.log
python3 bench/tools/timeline_summary.py $R/tl.csv --steps 16 --detail 0 --segments > $R/timeline_32k.txt 2>&1
head -30 $R/timeline_32k.txt; rm -f $R/tl.csv
tar -czf $OUT/visit6.tar.gz -C $R . && rm -rf $R
