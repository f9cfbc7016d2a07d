#!/usr/bin/env bash
# Session 21, visit 4: when should the fused MoE gate/up let down launch? Today after routing, so down's blocks
# (on the SMs with room) fetch down's weights during gate/up's weight phase, competing for HBM.
#   gte = session21_gate_up_trigger_at_exit.patch: no trigger (down launches as gate/up's blocks exit);
#   gtd = session21_gate_up_trigger_after_dots.patch: each block triggers once a warp's gate/up weights have landed
#         and been multiplied.
# Build here first: bench/tools/build_variant.sh PATCH gte|gtd; build/exp/imp_head (eb1dd79); build/probes/moe_phase
# (the tree) and moe_phase_gtd (moe_phase_probe.cu with the gtd patch applied).
# Carry build/carry.tar.xz (build/exp/imp_{head,gte,gtd}, build/cuda/bin/lib, build/probes/{moe_phase,moe_phase_gtd}).
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for p in moe_phase moe_phase_gtd; do
  build/probes/$p > "$out/$p.txt" 2>&1; echo "== $p"; cat "$out/$p.txt"
done
VARIANTS="head gte gtd" AB_ARGS="--pp 1 --tg 128 --context 1024,32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
