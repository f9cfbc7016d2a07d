#!/usr/bin/env bash
# Prepared in session 20 (not yet run): two decode attention candidates against the tree (head).
#   half = session21_attention_mma_half_splits.patch: the tensor-core partial kernel with half the splits (33 per KV
#          head in decode), so the combine reads half the partials;
#   prep = session21_prep_constants_before_wait.patch: the attention prep kernel loads the position, the heads' norm
#          weights and RoPE frequencies before its PDL wait (after it, only the in-projection's output);
#   carve = session21_carveout_max_shared.patch: every kernel asks for the largest shared-memory carveout, so no SM
#          has to drain before a block with more shared memory than its current L1/shared split becomes resident
#          (session 15: blocks with ~60 KB did not become resident early under PDL);
#   nomma = session21_attention_without_mma.patch: the tensor-core attention kernel never chosen (64f7b6d's
#          attention), for a prefill A/B: prefill's QSA-tail rows take the new kernel too, and c26e931's pp figures
#          (-0.2 to -0.7% against 64f7b6d's, from another machine) were not A/B'd.
# Build here first (each prints its binaries):
#   bench/tools/build_variant.sh - head
#   bench/tools/build_variant.sh bench/experiments/session21_attention_mma_half_splits.patch half
#   bench/tools/build_variant.sh bench/experiments/session21_prep_constants_before_wait.patch prep
#   bench/tools/build_variant.sh bench/experiments/session21_attention_without_mma.patch nomma
#   bench/tools/build_variant.sh bench/experiments/session21_carveout_max_shared.patch carve
# Carry build/carry.tar.xz (build/exp/imp_{head,half,prep,nomma,carve}, build/exp/imp_gpu_tests_{head,half,prep},
# build/cuda/bin/lib, build/probes/{atomic_reduce_probe,attention_phase}).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# Probes first (seconds): L2 atomics for a fused MoE's reduction; the decode attention's phases (session 20's build).
build/probes/atomic_reduce_probe > "$out/atomic_reduce_probe.txt" 2>&1; cat "$out/atomic_reduce_probe.txt"
for ctx in 1024 32768; do build/probes/attention_phase $ctx > "$out/attention_phase_$ctx.txt" 2>&1; done
build/exp/imp_gpu_tests_head > "$out/gpu_tests_head.log" 2>&1  # all of them: eb1dd79 was not run on the device
echo "tests head rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_head.log" | tr '\n' ' ')"
for v in half prep; do
  build/exp/imp_gpu_tests_$v --gtest_filter='*Attention*:*Golden*:*Qsa*' > "$out/gpu_tests_$v.log" 2>&1
  echo "tests $v rc=$?: $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests_$v.log" | tr '\n' ' ')"
done
# The prefill A/B first: variants_visit.sh packs $OUT at its end, so the decode A/B comes last.
for i in 1 2; do
  for v in head nomma carve; do
    build/exp/imp_$v bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 4096,16384 --tg 1 \
      --context 1 --runs 3 --out "$out/pp_${v}_$i.json" > /dev/null 2> "$out/pp_${v}_$i.log"
    echo "pp $v$i: $(grep -E 'pp ' "$out/pp_${v}_$i.log" | cut -c12-60 | tr '\n' ' ')"
  done
done
VARIANTS="head half prep carve" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
