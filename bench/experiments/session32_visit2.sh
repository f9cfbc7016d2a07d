# Session 32, visit 2: prefill's fp16 term (uncommitted tree as build/exp/imp_f16 and imp_gpu_tests_f16) against
# 05dbb32 (imp_main4): the whole GPU suite on f16, pp 4096 A/B in three alternated rounds, a prefill timeline of f16.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
timeout 300 build/exp/imp_gpu_tests_f16 > $OUT/gpu_tests_f16.log 2>&1; echo "f16 gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $OUT/gpu_tests_f16.log | head -24
cfg=bench/configs/qwen3.8-flash-next.json
for v in main4 f16 f16 main4 main4 f16; do
  timeout 60 build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 5 --out $OUT/$v.json > /dev/null 2> $OUT/$v.log
  echo "$v rc=$?: $(grep -E 'pp ' $OUT/$v.log | cut -c12-80)"
done
grep -E "low-term|free" $OUT/f16.log | head -3
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$OUT/tl.csv" build/exp/imp_f16 bench --dummy $cfg --backend cuda \
  --pp 4096 --tg 1 --context 1 --runs 2 --out "$OUT/tl.json" > /dev/null 2> "$OUT/tl.log"
echo "timeline rc=$?"
python3 bench/tools/timeline_summary.py "$OUT/tl.csv" --prefill --steps 1 --detail 90 > "$OUT/timeline_prefill_f16.txt" 2>&1
head -28 "$OUT/timeline_prefill_f16.txt"; rm -f "$OUT/tl.csv"
tar -czf $OUT/visit2.tar.gz -C $OUT --exclude=visit2.tar.gz . 2>/dev/null
