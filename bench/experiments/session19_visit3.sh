#!/usr/bin/env bash
# Session 19, third visit: the hyper-connection read variants on top of r3 (bench/experiments/hc_read_down_r3.patch:
# the read-down's tail finished by one warp, 3 rows per block, 108 blocks). Phase probes, r3's GPU tests, a decode
# A/B (tg 128 at 1K and 32K, alternating, two rounds) of main, r3, r3p4 (v_r3p4.patch: 16 warps per read-down
# block), r4 (v_r4.patch: 4 rows per block), r3u20 / r3u10 (v_r3u20 / v_r3u10.patch: 20 / 10 up/mix warps per
# block), then a CUPTI decode timeline of r3. Builds: bench/tools/build_variant.sh PATCH NAME.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for v in read r3 r3p4 r4 r3u20; do echo "== probe $v"; build/probes/hc_$v 2>&1 | tee "$out/probe_$v.txt" | head -1; done
build/exp/imp_gpu_tests_r3 --gtest_filter='*HyperConnection*:*Golden*:*Decode*' > "$out/gpu_tests_r3.log" 2>&1
echo "r3 tests rc=$? (${SECONDS}s)"; grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_r3.log" | tail -14
for i in 1 2; do
  for v in main r3 r3p4 r4 r3u20 r3u10; do
    build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 1 --tg 128 --context 1024,32768 --runs 5 \
      --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E 'tg ' "$out/ab_${v}_$i.log" | cut -c12-70 | tr '\n' ' ') (${SECONDS}s)"
  done
done
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
  IMP_TIMELINE="$out/timeline.csv" build/exp/imp_r3 bench --dummy $cfg --backend cuda --pp 1 \
  --tg 24 --context 1024 --runs 1 --out "$out/bench_timeline_r3.json" > /dev/null 2> "$out/timeline_r3.log"
echo "timeline rc=$?"
python3 bench/tools/timeline_summary.py "$out/timeline.csv" --steps 16 --detail 150 > "$out/timeline_r3.txt" 2>&1
python3 bench/tools/timeline_summary.py "$out/timeline.csv" --steps 16 --segments > "$out/timeline_r3_segments.txt" 2>&1
head -12 "$out/timeline_r3.txt"; rm -f "$out/timeline.csv"
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
