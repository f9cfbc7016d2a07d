#!/usr/bin/env bash
# Session 33, visit 1: the decode GEMVs with each warp's whole row copied into shared memory before the PDL wait
# (session33_gemv_staged.patch: every gemv_rows kernel; ..._k2560.patch: rows of at most 2560 inputs only, so the
# 6144-input output projections keep their L1 for x). Tests of the staged build on the GEMV, GDN, fused-decode and
# golden suites, A/B/C decode (tg 128 at 1K / 32K, two alternated rounds), CUPTI decode timelines of base and staged.
# Carry build/carry.tar.xz (build/exp/imp_{base,staged,staged2560}, imp_gpu_tests_staged, libkernel_timeline.so,
# build/exp/lib, build/cuda/bin/lib).
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $R/gpu.txt 2>&1
timeout 150 build/exp/imp_gpu_tests_staged --gtest_filter='GpuKernels.*:GpuDecodeFused.*:GpuGatedDeltaNet.*:*Golden*:GpuAttention*' > $R/tests_staged.txt 2>&1
echo "tests staged rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED|golden-cuda" $R/tests_staged.txt | head -20
cfg=bench/configs/qwen3.8-flash-next.json
for v in base staged; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$R/tl.csv" timeout 90 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 1 --tg 24 --context 1024 --runs 1 --out "$R/tl_$v.json" > /dev/null 2> "$R/tl_$v.log"
  python3 bench/tools/timeline_summary.py "$R/tl.csv" --steps 16 --detail 0 --segments > "$R/timeline_$v.txt" 2>&1
  echo "== timeline $v"; head -32 "$R/timeline_$v.txt"; rm -f "$R/tl.csv"
done
for i in 1 2; do for v in base staged staged2560; do
  IMP_COMMIT="$(cat build/exp/imp_$v.label)" timeout 100 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 1 --tg 128 --context 1024,32768 --runs 5 --out $R/${v}_$i.json > /dev/null 2> $R/${v}_$i.log
  echo "$v$i rc=$?: $(grep -E 'tg ' $R/${v}_$i.log | cut -c12-90 | tr '\n' ' ')"
done; done
tar -czf $OUT/visit1.tar.gz -C $R . && rm -rf $R
