# Session 32, visit 3: 73c8a53 (the fp16 term, fused into up/mix) in full: scripts/gpu_visit.sh (GPU suite, bench
# pp 512/4096/16384 + tg 128 at 1K/32K, memcheck, generate, prefill timeline), then pp 4096 A/B against 05dbb32
# (imp_main4) and the unfused form (imp_f16) in two alternated rounds.
R=$OUT/raw; mkdir -p $R
OUT=$R IMP_COMMIT=73c8a53 SERVER=0 TIMELINE_PREFILL=1 \
  MEMCHECK_FILTER='*Golden*/ple_qsa:*Golden*/nvfp4:GpuGemmF16.*:GpuLowTermWeights.*:GpuHyperConnection.UpMix*:*MoePrefill*Tiny*' \
  IMP_BENCH_ARGS="--pp 512,4096,16384 --tg 128 --context 1024,32768 --runs 5" timeout 420 bash scripts/gpu_visit.sh > $R/visit.log 2>&1
echo "gpu_visit rc=$?"; grep -E "rc=|pp |tg |roofline|FAILED|PASSED|golden-cuda|ERROR SUMMARY|steps 1" $R/visit.log | head -40
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for v in main4 f16 f16b f16b f16 main4; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $R/$v.json > /dev/null 2> $R/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $R/$v.log | cut -c12-80)"
done
tar -czf $OUT/visit3.tar.gz -C $R . && rm -rf $R
