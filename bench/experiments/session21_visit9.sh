#!/usr/bin/env bash
# Session 21, visit 9: which half of visit 8's QSA selection change cost 2% at 32K?
#   qagg = session21_qsa_select_aggregated_only.patch (one histogram atomic per distinct digit and warp);
#   qstg = session21_qsa_select_staged_only.patch (the keys staged in 32 KB of shared memory).
# Carry build/carry.tar.xz (build/exp/imp_{head,qagg,qstg}, build/cuda/bin/lib).
set -uo pipefail
VARIANTS="head qagg qstg" AB_ARGS="--pp 1 --tg 128 --context 32768 --runs 5" TL_VARIANTS= bash bench/tools/variants_visit.sh
