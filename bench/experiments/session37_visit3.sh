#!/usr/bin/env bash
# Session 37, third visit: where the QSA score kernel's ~7 us after its wait go at 32K (visit 2: every block ends
# 7.04-7.1 us after the wait, the norms done at ~2.2): pr2 = session37_qsa_score_phase_probe2.patch adds stamps
# after warp 0's pre-wait key loads have arrived (a dependency on their values) and after its first batch of scores.
# Three runs (each prints the last attention layer of its last step).
# Run: `tar -xJf build/carry.tar.xz && timeout 300 bash bench/experiments/session37_visit3.sh`.
set -uo pipefail
R=$OUT/raw; mkdir -p $R
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
for i in 1 2 3; do
  timeout 90 build/exp/imp_pr2 bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 1 --tg 24 \
    --context 32768 --runs 1 --out "$R/probe_pr2_$i.json" > /dev/null 2> "$R/probe_pr2_$i.log"
  echo "== probe pr2 run $i rc=$?"; python3 bench/experiments/session37_qsa_phase_summary.py "$R/probe_pr2_$i.log" 2
done
tar -czf $OUT/raw.tar.gz -C $R . && rm -rf $R
