#!/usr/bin/env bash
# Session 27, visit 8: CUPTI kernel timelines of the final tree (cl = 803adfa's code): decode at 1K and 32K with
# half-layer segments (the last ones were 6dfaf9f's, session 22) and one 4096-token prefill.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:$PWD/build/exp/lib:${LD_LIBRARY_PATH:-}"
cfg=bench/configs/qwen3.8-flash-next.json
for ctx in 1024 32768; do
  CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" IMP_TIMELINE="$out/tl.csv" timeout 120 build/exp/imp_cl bench \
    --dummy $cfg --backend cuda --pp 1 --tg 24 --context $ctx --runs 1 --out "$out/tl_$ctx.json" > /dev/null 2>&1
  echo "decode $ctx rc=$?"
  python3 bench/tools/timeline_summary.py "$out/tl.csv" --steps 16 --detail 0 --segments > "$out/decode_timeline_$ctx.txt" 2>&1
  grep -E "^steps|  (moe|gdn|attention|other) " "$out/decode_timeline_$ctx.txt"; rm -f "$out/tl.csv"
done
CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" IMP_TIMELINE="$out/tl.csv" timeout 120 build/exp/imp_cl bench \
  --dummy $cfg --backend cuda --pp 4096 --tg 1 --context 1 --runs 1 --out "$out/tl_prefill.json" > /dev/null 2>&1
echo "prefill rc=$?"
python3 bench/tools/timeline_summary.py "$out/tl.csv" --prefill --steps 1 --detail 0 > "$out/prefill_timeline.txt" 2>&1
head -12 "$out/prefill_timeline.txt"; rm -f "$out/tl.csv"
archive=$(mktemp /tmp/visit_outputs.XXXXXX)
tar -czf "$archive" -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv "$archive" "$out/visit_outputs.tar.gz"
