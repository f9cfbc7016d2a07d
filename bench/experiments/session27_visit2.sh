#!/usr/bin/env bash
# Prepared in session 26 (compiled, not run). Four steps on the TMA flash attention (d507e94: 605 us per layer at
# pp 4096) and a refactor, each against head28 (= c87595b):
#   fak  (session26_attention_prefill_k_ahead.patch): K and V on rings of their own, K three stages and a tile ahead
#        of V (K is free once S is done; 64 KB of Q + 5 x 32 KB of stages = 225 KB);
#   fag  (session26_attention_prefill_gate_prefetch.patch): the producer warps prefetch the block's gate rows into L2,
#        and the epilogue loads a slice's 16 gate pairs before using any (the cp.async form's profile: ~10% of its
#        samples waited on the epilogue's gate loads);
#   fakg (..._k_ahead_gate_prefetch.patch): both;
#   fako (..._k_ahead_overlap.patch): fak with tile i's P V running while tile i + 1's S is exponentiated (session
#        25's fa2 overlap, slower on the cp.async producer; the producer's K-ahead order feeds it);
#   sm   (session26_attention_softmax_shared.patch): the online softmax step written once for the mma.sync and the
#        wgmma kernels (duplicates D2 of session 26); must be as fast as head28 and pass the same tests.
# Per variant: its attention prefill tests under a timeout (a failure drops it), the golden tests, memcheck of the
# small attention shapes; then the A/B at pp 4096 in two rounds and the attention kernels' timelines.
# Build here: bench/tools/build_variant.sh - head28, and PATCH NAME for each above. Carry build/carry.tar.xz.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
variants="head28"; tl=""  # head28's attention: 605 us per layer (session 26)
for v in fak fag fakg fako sm; do
  t=build/exp/imp_gpu_tests_$v
  timeout 60 $t --gtest_filter='*AttentionPrefill*:*Golden*' > "$out/gpu_tests_$v.log" 2>&1; rc=$?; echo "$v attention+golden tests rc=$rc"
  grep -E "attention prefill.*D=256|golden-cuda.*(long|qsa)|Failure|FAILED|PASSED" "$out/gpu_tests_$v.log" | tail -9
  timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $t --gtest_filter='*AttentionPrefill*Small*' > "$out/memcheck_$v.log" 2>&1
  mc=$?; echo "$v memcheck rc=$mc"; grep -E "ERROR SUMMARY" "$out/memcheck_$v.log"
  [ $rc = 0 ] && [ $mc = 0 ] && { variants="$variants $v"; tl="$tl $v"; }
done
VARIANTS="$variants" TL_VARIANTS="$tl" TL_PATTERN="^(attention_prefill|steps)" \
  AB_ARGS="--pp 4096 --tg 1 --context 1 --runs 5" bash bench/tools/variants_visit.sh
