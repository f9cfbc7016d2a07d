# Session 32, visit 5: the tree with the GDN core's fp16 term from the output kernel and the attention core's in one pass
# (build/cuda = imp_f16d) in full: scripts/gpu_visit.sh (GPU suite, bench pp 512/4096/16384 + tg 128 at 1K/32K,
# memcheck, generate, prefill timeline), then pp 4096 A/B against 349c5ee (imp_f16c) in two alternated rounds.
R=$OUT/raw; mkdir -p $R
OUT=$R IMP_COMMIT=$(cat build/exp/imp_f16d.label | cut -c1-7) SERVER=0 TIMELINE_PREFILL=1 \
  MEMCHECK_FILTER='GpuGatedDeltaNetPrefill.ChunkedMatchesCpuAtSmallShapes:*Golden*/ple_qsa:*Golden*/nvfp4:GpuGemmF16.*:GpuLowTermWeights.*:GpuHyperConnection.UpMix*:*MoePrefill*Tiny*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" timeout 420 bash scripts/gpu_visit.sh > $R/visit.log 2>&1
echo "gpu_visit rc=$?"; grep -E "rc=|pp |tg |roofline|FAILED|PASSED|golden-cuda|ERROR SUMMARY|steps 1|low-term" $R/visit.log | head -40
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for v in f16c f16d f16d f16c; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $R/$v.json > /dev/null 2> $R/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $R/$v.log | cut -c12-80)"
done
tar -czf $OUT/visit5.tar.gz -C $R . && rm -rf $R
