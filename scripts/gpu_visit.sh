#!/usr/bin/env bash
# One visit to the GPU machine, most important first: the GPU tests (kernels against their CPU twins, the
# golden fixtures through the CUDA engine), the full-scale dummy-weight benchmark, compute-sanitizer on
# fixture models, imp generate cuda vs cpu, and the server's openai-SDK suite on the CUDA backend (wheels
# carried in build/wheels: the machine reaches no package registry). Expects build/cuda from this machine
# (carried); writes logs and JSON under $OUT, packed at the end into $OUT/visit_outputs.tar.gz (a visit returns
# only a few files). Set IMP_COMMIT to the commit the build came from.
# Steps: MEMCHECK=0, GENERATE=0 or SERVER=0 skip theirs; KERNEL_BENCH=1 adds imp_kernel_bench; TIMELINE=1 adds a
# CUPTI kernel timeline of full-scale decode steps (build/exp/libkernel_timeline.so, carried; see
# bench/tools/kernel_timeline.cpp); TIMELINE_PREFILL=1 the same for a 4096-token prefill (per-kernel summary only);
# PROFILE=1 adds scripts/gpu_profile.sh (PREFILL=N for a prefill profile too).
# If a golden fixture fails with this build and a fallback build is carried (build/fallback: imp and
# imp_gpu_tests of an earlier commit, IMP_FALLBACK_COMMIT), the later steps use the fallback instead, so
# the benchmark numbers always come from a build whose engine passed the golden tests.
# The long steps run under timeouts (rc 124): a hang costs its own minutes, not the visit's.
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
# Shared libraries the GPU machine lacks (cpp-httplib and what it links), carried next to the binaries.
# cuBLAS from the toolkit on the machine (lib or lib64, whichever it has).
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
imp=build/cuda/bin/imp
tests=build/cuda/tests/imp_gpu_tests
echo "== gpu tests"
timeout 600 "$tests" > "$out/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "golden-cuda|FAILED|PASSED|tests ran" "$out/gpu_tests.log" | tail -40
if grep -q "FAILED.*Golden" "$out/gpu_tests.log" && [ -x build/fallback/imp ]; then
  echo "== golden failed: falling back to ${IMP_FALLBACK_COMMIT:-the fallback build}"
  imp=build/fallback/imp
  tests=build/fallback/imp_gpu_tests
  export IMP_COMMIT=${IMP_FALLBACK_COMMIT:-unknown}
  "$tests" --gtest_filter='*Golden*' > "$out/gpu_tests_fallback.log" 2>&1; echo "fallback golden rc=$?"
  grep -E "golden-cuda|FAILED|PASSED" "$out/gpu_tests_fallback.log" | tail -15
fi
echo "== imp bench: full-scale dummy weights ($imp)"
timeout 400 "$imp" bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda ${IMP_BENCH_ARGS:-} \
  --out "$out/bench_dummy.json" > /dev/null 2> "$out/bench_dummy.log"
echo "bench rc=$?"; grep -E "pp |tg |roofline|memory plan|weights|prefill:" "$out/bench_dummy.log"
if [ "${KERNEL_BENCH:-0}" = 1 ]; then
  echo "== imp_kernel_bench"
  build/cuda/bin/imp_kernel_bench > "$out/kernel_bench.json" 2> "$out/kernel_bench.log"; echo "kernel bench rc=$?"
  head -c 1500 "$out/kernel_bench.json"; echo
fi
if [ "${TIMELINE:-0}" = 1 ]; then
  echo "== kernel timeline of decode steps (CUPTI)"
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$out/timeline.csv" "$imp" bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda --pp 1 \
    --tg 24 --context ${TIMELINE_CONTEXT:-1024} --runs 1 --out "$out/bench_timeline.json" > /dev/null 2> "$out/timeline.log"
  echo "timeline rc=$?"; grep -E "tg |kernel_timeline" "$out/timeline.log"
  python3 bench/tools/timeline_summary.py "$out/timeline.csv" --steps 16 --detail 150 > "$out/timeline_summary.txt" 2>&1
  head -3 "$out/timeline_summary.txt"
fi
if [ "${TIMELINE_PREFILL:-0}" = 1 ]; then
  echo "== kernel timeline of a 4096-token prefill (CUPTI)"
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$PWD/build/exp/lib" CUDA_INJECTION64_PATH="$PWD/build/exp/libkernel_timeline.so" \
    IMP_TIMELINE="$out/timeline_prefill.csv" "$imp" bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda \
    --pp 4096 --tg 1 --context 1 --runs 2 --out "$out/bench_timeline_prefill.json" > /dev/null 2> "$out/timeline_prefill.log"
  echo "prefill timeline rc=$?"; grep -E "pp |kernel_timeline" "$out/timeline_prefill.log"
  python3 bench/tools/timeline_summary.py "$out/timeline_prefill.csv" --prefill --steps 1 --detail 90 > "$out/timeline_prefill_summary.txt" 2>&1
  head -30 "$out/timeline_prefill_summary.txt"
  rm -f "$out/timeline_prefill.csv"  # large; the summary is what matters
fi
if [ "${MEMCHECK:-1}" = 1 ]; then
echo "== compute-sanitizer memcheck on fixture models"
timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$tests" \
  --gtest_filter="${MEMCHECK_FILTER:-*Golden*/ple_qsa:*Golden*/nvfp4:*Golden*/many_experts:*Ngram*}" > "$out/memcheck.log" 2>&1
echo "memcheck rc=$?"; tail -3 "$out/memcheck.log"
fi
if [ "${GENERATE:-1}" = 1 ]; then
echo "== imp generate: cuda vs cpu on the bundled fixture"
for backend in cpu cuda; do
  "$imp" generate --model tests/fixtures/golden/ple_qsa --backend "$backend" --prompt-tokens 5,6,7,8,9 \
    --max-tokens 32 --ignore-eos --json 2>&1 | tail -1 | tee -a "$out/generate.log" | cut -c1-160
done
fi
if [ "${SERVER:-1}" = 1 ]; then
echo "== server suite (openai SDK) on the cuda backend"
python3 -m pip install -q --no-index --find-links build/wheels --target /tmp/pydeps openai httpx2 pytest > /dev/null 2>&1
PYTHONPATH=/tmp/pydeps IMP_BINARY="$PWD/$imp" IMP_BACKEND=cuda timeout ${SERVER_TIMEOUT:-150} python3 -m pytest -q -p no:cacheprovider \
  tests/server > "$out/server_cuda.log" 2>&1; echo "server suite rc=$?"; tail -3 "$out/server_cuda.log"
fi
if [ "${PROFILE:-0}" = 1 ]; then
  echo "== ncu profile (4-layer slice)"
  OUT="$out" bash scripts/gpu_profile.sh
fi
# A visit brings back only a few files (8 in session 5: the rest were lost), so everything this script wrote
# goes into one archive; the caller's own log next to it stays readable as is.
archive=$(mktemp /tmp/visit_outputs.XXXXXX)  # outside $out, so the folder does not change while tar reads it
if tar -czf "$archive" -C "$out" --exclude=./visit.log --exclude=./visit_outputs.tar.gz .; then
  mv "$archive" "$out/visit_outputs.tar.gz"
  find "$out" -maxdepth 1 -type f ! -name visit_outputs.tar.gz ! -name visit.log -delete
  echo "== outputs in visit_outputs.tar.gz: $(tar -tzf "$out/visit_outputs.tar.gz" | grep -vc '/$') files"
fi
