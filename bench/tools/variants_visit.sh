#!/usr/bin/env bash
# Prefill A/B/C... of several builds in one GPU visit: VARIANTS="a b c" runs build/exp/imp_<name> for each name at
# pp 4096 (AB_ARGS to change), two rounds in the given order so that drift hits all, then a CUPTI prefill timeline
# of each name in TL_VARIANTS (default: all; TL_VARIANTS= for none; needs build/exp/libkernel_timeline.so, see
# kernel_timeline.cpp) with the MoE kernels printed (TL_PATTERN: another grep -E pattern). Whatever earlier steps of a visit left in $OUT is packed too. Everything goes into $OUT/visit_outputs.tar.gz (a visit returns only a few files).
# Each run's JSON records build/exp/imp_<name>.label (written by build_variant.sh; carry it) as its commit: the
# device's copy of the repository may hold an older .git. Session 8 compared the MoE prefill variants with it (bench/results/2026-11-30_moe_wgmma_ab_session8.txt).
# Every run is under a timeout: a build that hangs costs its own minutes, not the visit's.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for i in 1 2; do
  for v in $VARIANTS; do
    IMP_COMMIT="$(cat build/exp/imp_$v.label 2> /dev/null || echo "unknown (build/exp/imp_$v.label not carried)")" \
      timeout 200 build/exp/imp_$v bench --dummy $cfg --backend cuda ${AB_ARGS:---pp 4096 --tg 1 --context 1 --runs 5} \
      --out "$out/${v}_$i.json" > /dev/null 2> "$out/${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E '(pp|tg) ' "$out/${v}_$i.log" | cut -c12-90 | tr '\n' ' ')"
  done
done
for v in ${TL_VARIANTS-$VARIANTS}; do
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$out/tl.csv" timeout 120 build/exp/imp_$v bench --dummy $cfg --backend cuda \
    --pp 4096 --tg 1 --context 1 --runs 1 --out "$out/tl_$v.json" > /dev/null 2>&1
  python3 bench/tools/timeline_summary.py "$out/tl.csv" --prefill --steps 1 --detail 0 > "$out/tl_$v.txt" 2>&1
  echo "== $v"; grep -E "${TL_PATTERN:-^(moe_|combine|steps)}" "$out/tl_$v.txt"; rm -f "$out/tl.csv"
done
archive=$(mktemp /tmp/visit_outputs.XXXXXX)
tar -czf "$archive" -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv "$archive" "$out/visit_outputs.tar.gz"
