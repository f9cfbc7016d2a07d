#!/usr/bin/env bash
# One visit to the GPU machine: kernel and engine tests (CTest label gpu: kernels against their CPU twins,
# the golden fixtures through the CUDA engine), compute-sanitizer, imp generate on the CUDA backend, the
# full-scale dummy-weight benchmark and the kernel benchmarks. Expects build/cuda from this machine (carried);
# writes logs and JSON under $OUT. Set IMP_COMMIT to the commit the build came from.
set -uo pipefail
out=${OUT:-/tmp/imp_out}
mkdir -p "$out"
# Shared libraries the GPU machine lacks (cpp-httplib and what it links), carried next to the binaries.
export LD_LIBRARY_PATH="$PWD/build/cuda/bin/lib:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/nvidia_smi.txt"
echo "== gpu tests"
build/cuda/tests/imp_gpu_tests --gtest_output=json:"$out/gpu_tests.json" 2>&1 | tee "$out/gpu_tests.log" | grep -E "golden-cuda|FAILED|PASSED|tests ran" | tail -30
echo "== compute-sanitizer memcheck"
compute-sanitizer --tool memcheck --error-exitcode 3 build/cuda/tests/imp_gpu_tests 2>&1 | tail -6 | tee "$out/memcheck.log"
echo "== imp generate: cuda vs cpu on the bundled fixture"
for backend in cpu cuda; do
  build/cuda/bin/imp generate --model tests/fixtures/golden/ple_qsa --backend "$backend" --prompt-tokens 5,6,7,8,9 \
    --max-tokens 32 --ignore-eos --json > "$out/generate_$backend.json" 2> "$out/generate_$backend.log"
  echo "$backend rc=$? $(cut -c1-200 "$out/generate_$backend.json")"
done
echo "== imp bench: full-scale dummy weights"
build/cuda/bin/imp bench --dummy bench/configs/qwen3.8-flash-next.json --backend cuda ${IMP_BENCH_ARGS:-} \
  --out "$out/bench_dummy.json" > /dev/null 2> "$out/bench_dummy.log"
echo "bench rc=$?"; grep -E "pp |tg |roofline|memory plan|weights" "$out/bench_dummy.log"
echo "== kernel bench"
build/cuda/bin/imp_kernel_bench > "$out/kernel_bench.json" 2>&1; echo "kernel bench rc=$?"
