#!/usr/bin/env bash
# Session 19, second visit: the decode hyper-connection read probe with the read-down's tail finished by one warp
# (bench/experiments/hc_read_down_tail_warp.patch), the SASS of the decode read/GEMV/MoE kernels (cuobjdump, if the
# machine has it), the GPU tests of whole+tail, and a decode A/B (tg 128 at 1K and 32K, alternating, two rounds) of
# main, whole (bench/experiments/gemv_whole_batch.patch: the MoE input GEMV's weights all before the PDL wait),
# wt (whole + tail) and r3 (wt with 3 rows per read-down block). Builds: bench/tools/build_variant.sh (see the
# session's A/B log).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for v in hc_read hc_tail; do echo "== probe $v"; build/probes/$v 2>&1 | tee "$out/probe_$v.txt"; done
if [ -x /usr/local/cuda/bin/cuobjdump ]; then
  /usr/local/cuda/bin/cuobjdump -sass build/exp/imp_wt > /tmp/all.sass 2>&1
  awk '/Function : /{keep = ($0 ~ /hc_read|gemv_bf16_kernel|moe_decode|gdn_in_proj_conv|gdn_recurrent/)} keep' /tmp/all.sass \
    > "$out/sass_wt_decode.txt"; echo "sass: $(wc -l < "$out/sass_wt_decode.txt") lines"
else echo "no cuobjdump: $(ls /usr/local/cuda/bin | tr '\n' ' ')"; fi
build/exp/imp_gpu_tests_wt --gtest_filter='*Gemv*:*HyperConnection*:*Golden*:*Moe*:*Decode*' > "$out/gpu_tests_wt.log" 2>&1
echo "wt tests rc=$? (${SECONDS}s)"; grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_wt.log" | tail -14
VARIANTS="main whole wt r3" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= \
  bash bench/tools/variants_visit.sh
