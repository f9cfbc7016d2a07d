#!/usr/bin/env bash
# Session 17 visit 6 (last, ~490 s of device time left): 9f0a9a8's GPU tests, the QSA A/B against imp_prev (424d3cd),
# memcheck, the full-scale bench, generate cuda vs cpu and the server suite (scripts/gpu_visit.sh's steps, without
# timelines, the A/B first). build/exp/imp_prev: 424d3cd's imp (git checkout 424d3cd, then
# bench/tools/build_variant.sh - prev); carried with build/cuda/bin, build/cuda/tests/imp_gpu_tests, build/wheels, build/exp.
set -uo pipefail
out=${OUT:-/tmp/imp_out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export IMP_COMMIT=9f0a9a8
cfg=bench/configs/qwen3.8-flash-next.json
build/cuda/tests/imp_gpu_tests > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$? after ${SECONDS}s"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests.log" | tail -14
cp build/cuda/bin/imp build/exp/imp_cur
for i in 1 2; do
  for v in prev cur; do
    build/exp/imp_$v bench --dummy $cfg --backend cuda --pp 512,4096,16384 --tg 128 --context 32768 --runs 5 \
      --out "$out/ab_${v}_$i.json" > /dev/null 2> "$out/ab_${v}_$i.log"
    echo "$v$i rc=$?: $(grep -E '(pp|tg) ' "$out/ab_${v}_$i.log" | cut -c12-62 | tr '\n' ' ') (${SECONDS}s)"
  done
done
compute-sanitizer --tool memcheck --error-exitcode 3 build/cuda/tests/imp_gpu_tests \
  --gtest_filter='*Golden*/ple_qsa:*Golden*/long_sparse:*Golden*/nvfp4:*Qsa*:*HyperConnection*:*GpuPle*' > "$out/memcheck.log" 2>&1
echo "memcheck rc=$? (${SECONDS}s)"; tail -2 "$out/memcheck.log"
build/cuda/bin/imp bench --dummy $cfg --backend cuda --pp 512,4096,16384 --tg 128,512 --context 1024,32768 --runs 5 \
  --out "$out/bench_dummy.json" > /dev/null 2> "$out/bench_dummy.log"
echo "bench rc=$? (${SECONDS}s)"; grep -E "pp |tg |roofline" "$out/bench_dummy.log"
for backend in cpu cuda; do
  build/cuda/bin/imp generate --model tests/fixtures/golden/ple_qsa --backend "$backend" --prompt-tokens 5,6,7,8,9 \
    --max-tokens 32 --ignore-eos --json 2>&1 | tail -1 | tee -a "$out/generate.log" | cut -c1-100
done
python3 -m pip install -q --no-index --find-links build/wheels --target /tmp/pydeps openai httpx2 pytest > /dev/null 2>&1
PYTHONPATH=/tmp/pydeps IMP_BINARY="$PWD/build/cuda/bin/imp" IMP_BACKEND=cuda timeout 100 python3 -m pytest -q -p no:cacheprovider \
  tests/server > "$out/server_cuda.log" 2>&1; echo "server suite rc=$? (${SECONDS}s)"; tail -2 "$out/server_cuda.log"
tar -czf /tmp/v.tgz -C "$out" . && find "$out" -maxdepth 1 -type f -delete && mv /tmp/v.tgz "$out/visit_outputs.tar.gz"
