#!/usr/bin/env bash
# Session 27, visit 6: where the QSA decode selection's ~14-16 us go (visits 4-5: head29's kernel 14.4 us, the
# register-held form 15.8 us in isolation, both one SM at ~0.56 instructions per cycle and scheduler). Nsight
# Compute's full set and SASS source counters on one launch of each, 4-layer slice at 32K context.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
for v in head29 reg; do
  timeout 150 ncu --set full --clock-control none --cache-control none -k "regex:qsa_select" --launch-skip 2 \
    --launch-count 1 -o "$out/select_$v" build/exp/imp_$v bench --dummy bench/configs/flash-next-4layers.json \
    --backend cuda --pp 1 --tg 6 --context 32768 --runs 1 > "$out/ncu_run_$v.log" 2>&1; echo "$v ncu rc=$?"
  ncu -i "$out/select_$v.ncu-rep" --page source --csv --print-source sass > "$out/sass_$v.csv" 2> /dev/null
  ncu -i "$out/select_$v.ncu-rep" --page details > "$out/details_$v.txt" 2> /dev/null
  python3 bench/tools/ncu_sass_top.py "$out/sass_$v.csv" 30 > "$out/sass_top_$v.txt" 2>&1; head -40 "$out/sass_top_$v.txt"
  grep -E "Duration|Executed Instructions|Issued Ipc|No Eligible" "$out/details_$v.txt" | head -6
  rm -f "$out/select_$v.ncu-rep"
done
archive=$(mktemp /tmp/visit_outputs.XXXXXX)
tar -czf "$archive" -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv "$archive" "$out/visit_outputs.tar.gz"
