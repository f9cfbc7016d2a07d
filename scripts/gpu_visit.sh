#!/usr/bin/env bash
# One visit to the GPU machine, most important first: the GPU tests (kernels against their CPU twins, the
# golden fixtures through the CUDA engine), the full-scale dummy-weight benchmark, compute-sanitizer on the
# fixture models, imp generate cuda vs cpu, and the server's openai-SDK suite on the CUDA backend (wheels
# carried in build/wheels: the machine reaches no package registry). Expects build/cuda from this machine
# (carried); writes logs and JSON under $OUT. Set IMP_COMMIT to the commit the build came from.
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
# Shared libraries the GPU machine lacks (cpp-httplib and what it links), carried next to the binaries.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
echo "== gpu tests"
build/cuda/tests/imp_gpu_tests > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests.log" | tail -30
echo "== imp bench: full-scale dummy weights"
build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda ${IMP_BENCH_ARGS:-} \
  --out "$out/bench_dummy.json" > /dev/null 2> "$out/bench_dummy.log"
echo "bench rc=$?"; grep -E "pp |tg |roofline|memory plan|weights|prefill:" "$out/bench_dummy.log"
echo "== compute-sanitizer memcheck on the fixture models"
compute-sanitizer --tool memcheck --error-exitcode 3 build/cuda/tests/imp_gpu_tests --gtest_filter='*Golden*:*Ngram*' \
  > "$out/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -3 "$out/memcheck.log"
echo "== imp generate: cuda vs cpu on the bundled fixture"
for backend in cpu cuda; do
  build/cuda/bin/imp generate --model tests/fixtures/golden/ple_qsa --backend "$backend" --prompt-tokens 5,6,7,8,9 \
    --max-tokens 32 --ignore-eos --json 2>&1 | tail -1 | tee -a "$out/generate.log" | cut -c1-160
done
echo "== server suite (openai SDK) on the cuda backend"
python3 -m pip install -q --no-index --find-links build/wheels --target /tmp/pydeps openai httpx2 pytest > /dev/null 2>&1
PYTHONPATH=/tmp/pydeps IMP_BINARY="$PWD/build/cuda/bin/imp" IMP_BACKEND=cuda timeout 240 python3 -m pytest -q -p no:cacheprovider \
  tests/server > "$out/server_cuda.log" 2>&1; echo "server suite rc=$?"; tail -3 "$out/server_cuda.log"
