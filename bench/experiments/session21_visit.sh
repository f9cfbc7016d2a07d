#!/usr/bin/env bash
# Prepared in session 20 (not yet run): two decode attention candidates against the tree (head).
#   half = session21_attention_mma_half_splits.patch: the tensor-core partial kernel with half the splits (33 per KV
#          head in decode), so the combine reads half the partials;
#   prep = session21_prep_constants_before_wait.patch: the attention prep kernel loads the position, the heads' norm
#          weights and RoPE frequencies before its PDL wait (after it, only the in-projection's output);
#   nomma = session21_attention_without_mma.patch: the tree without the tensor-core attention kernel (64f7b6d's
#          attention), for a prefill A/B: prefill's QSA-tail rows take the new kernel too, and c26e931's pp figures
#          (-0.2 to -0.7% against 64f7b6d's, from another machine) were not A/B'd.
# Build here first (each prints its binaries):
#   bench/tools/build_variant.sh - head
#   bench/tools/build_variant.sh bench/experiments/session21_attention_mma_half_splits.patch half
#   bench/tools/build_variant.sh bench/experiments/session21_prep_constants_before_wait.patch prep
#   bench/tools/build_variant.sh bench/experiments/session21_attention_without_mma.patch nomma
# Carry build/carry.tar.xz (build/exp/imp_{head,half,prep,nomma}, build/exp/imp_gpu_tests_{half,prep},
# build/cuda/bin/lib).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in half prep; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*Attention*:*Golden*:*Qsa*' > "$out/gpu_tests_$v.log" 2>&1
  echo "tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_$v.log" | tr '\n' ' ')"
done
# The prefill A/B first: variants_visit.sh packs $OUT at its end, so the decode A/B comes last.
for i in 1 2; do
  for v in head nomma; do
    build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 512,4096,16384 --tg 1 \
      --context 1 --runs 5 --out "$out/pp_${v}_$i.json" > /dev/null 2> "$out/pp_${v}_$i.log"
    echo "pp $v$i: $(grep -E 'pp ' "$out/pp_${v}_$i.log" | cut -c12-60 | tr '\n' ' ')"
  done
done
VARIANTS="head half prep" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
