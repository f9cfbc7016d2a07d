#include "cuda/blas.h"

#include <cublasLt.h>

#include <map>
#include <tuple>

#include "core/error.h"
#include "core/log.h"
#include "cuda/check.h"

namespace imp::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's recommendation for Hopper

struct ThreadBlas {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  ThreadBlas() {
    check_blas(cublasCreate(&handle), "cublasCreate");
    IMP_CUDA_CHECK_ALLOC(cudaMalloc(&workspace, kWorkspaceBytes), kWorkspaceBytes);
    check_blas(cublasSetWorkspace(handle, workspace, kWorkspaceBytes), "cublasSetWorkspace");
  }
  ~ThreadBlas() {
    cublasDestroy(handle);
    cudaFree(workspace);
  }
  ThreadBlas(const ThreadBlas&) = delete;
  ThreadBlas& operator=(const ThreadBlas&) = delete;
};

ThreadBlas& thread_blas() {
  thread_local ThreadBlas blas;
  return blas;
}

// One FP8 GEMM shape's cuBLASLt descriptors and algorithm, found once (the heuristic query costs tens of us of
// host time, more than a small GEMM).
struct Fp8Plan {
  bool supported = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// The largest power of two up to 256 that divides the address.
uint32_t alignment(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  uint32_t bytes = 256;
  while (bytes > 1 && address % bytes != 0) bytes /= 2;
  return bytes;
}

struct ThreadLt {
  cublasLtHandle_t handle = nullptr;
  // (rows, n_out, k, ldy, alignment of A, B and C in bytes): an algorithm found for better-aligned pointers may assume
  // that alignment (cuBLASLt's heuristic assumes 256 bytes unless told), so each alignment gets its own plan.
  using Key = std::tuple<int32_t, int32_t, int32_t, int32_t, uint32_t, uint32_t, uint32_t>;
  std::map<Key, Fp8Plan> plans;
  // Prefill chunks have any number of rows (a server sees every prompt length), so the plans are dropped once
  // there are this many: a few heuristic queries again, instead of descriptors piling up.
  static constexpr size_t kMaxPlans = 512;
  ThreadLt() { check_blas(cublasLtCreate(&handle), "cublasLtCreate"); }
  ~ThreadLt() {
    clear();
    cublasLtDestroy(handle);
  }
  void clear() {  // descriptors are host objects: free to destroy once the launches that used them are enqueued
    for (auto& [shape, plan] : plans) {
      cublasLtMatrixLayoutDestroy(plan.a);
      cublasLtMatrixLayoutDestroy(plan.b);
      cublasLtMatrixLayoutDestroy(plan.c);
      cublasLtMatmulDescDestroy(plan.desc);
    }
    plans.clear();
  }
  ThreadLt(const ThreadLt&) = delete;
  ThreadLt& operator=(const ThreadLt&) = delete;

  // Column-major view as in gemm_bf16_rows: y^T [n_out, rows] += (W8^T)^T . x8^T, A = W8 (k x n_out, transposed),
  // B = x8 (k x rows), both scaled per outer index.
  // Shapes cuBLASLt has no such algorithm for are remembered as unsupported. The scale pointers are set before the
  // heuristic query (bench/experiments/fp8_lo_probe.cu did so and found an algorithm; without them none was found).
  const Fp8Plan& plan(int32_t rows, int32_t n_out, int32_t k, int32_t ldy, const void* a, const void* b, const void* c,
                      const float* a_scales, const float* b_scales) {
    const uint32_t align_a = alignment(a), align_b = alignment(b), align_c = alignment(c);
    const Key key{rows, n_out, k, ldy, align_a, align_b, align_c};
    if (plans.size() >= kMaxPlans && !plans.contains(key)) clear();
    auto [it, added] = plans.try_emplace(key);
    Fp8Plan& p = it->second;
    if (!added) return p;
    check_blas(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    const int32_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)), "FP8 GEMM transA");
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof(keep)), "FP8 GEMM transB");
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof(outer)), "FP8 GEMM A scales");
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof(outer)), "FP8 GEMM B scales");
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scales, sizeof(a_scales)),
               "FP8 GEMM A scale pointer");
    check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scales, sizeof(b_scales)),
               "FP8 GEMM B scale pointer");
    check_blas(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n_out, k), "FP8 GEMM layout A");
    check_blas(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, rows, k), "FP8 GEMM layout B");
    check_blas(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, n_out, rows, ldy), "FP8 GEMM layout C");
    cublasLtMatmulPreference_t preference;
    check_blas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const size_t workspace = kWorkspaceBytes;
    check_blas(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof(workspace)),
               "FP8 GEMM workspace preference");
    const std::tuple<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c}, {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c}};
    for (const auto& [attribute, bytes] : alignments) {
      check_blas(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &bytes, sizeof(bytes)), "FP8 GEMM alignment");
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.a, p.b, p.c, p.c, preference, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    p.supported = status == CUBLAS_STATUS_SUCCESS && found > 0;
    p.algo = result.algo;
    if (!p.supported) {  // once per shape: that GEMM is then slower (and more precise); say so
      log::warn("FP8 low term: cuBLASLt has no algorithm for {} x {} x {} (alignments {}/{}/{} bytes); that GEMM "
                "keeps its bf16 low term", rows, n_out, k, align_a, align_b, align_c);
    }
    return p;
  }
};

}  // namespace

void check_blas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLAS: {} failed: {}", what, cublasGetStatusString(status));
}

cublasHandle_t blas_handle(cudaStream_t stream) {
  ThreadBlas& blas = thread_blas();
  check_blas(cublasSetStream(blas.handle, stream), "cublasSetStream");
  return blas.handle;
}

namespace {

// Column-major view: y^T [n_out, rows] = alpha W [k, n_out]^T . x^T [k, rows] (+ y^T).
void gemm_rows(cudaDataType_t type, const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k,
               float alpha, float* y, bool accumulate, cudaStream_t stream, int32_t ldy, const char* what) {
  if (rows == 0 || n_out == 0) return;
  const float beta = accumulate ? 1.0f : 0.0f;
  check_blas(cublasGemmEx(blas_handle(stream), CUBLAS_OP_T, CUBLAS_OP_N, n_out, rows, k, &alpha, weight, type, k, x, type,
                          k, &beta, y, CUDA_R_32F, ldy == 0 ? n_out : ldy, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
             what);
}

}  // namespace

void gemm_bf16_rows(const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float* y,
                    bool accumulate, cudaStream_t stream, int32_t ldy) {
  gemm_rows(CUDA_R_16BF, x, weight, rows, n_out, k, 1.0f, y, accumulate, stream, ldy, "cublasGemmEx (bf16 prefill GEMM)");
}

void gemm_f16_rows(const uint16_t* x, const uint16_t* weight, int32_t rows, int32_t n_out, int32_t k, float alpha,
                   float* y, bool accumulate, cudaStream_t stream, int32_t ldy) {
  gemm_rows(CUDA_R_16F, x, weight, rows, n_out, k, alpha, y, accumulate, stream, ldy, "cublasGemmEx (fp16 prefill GEMM)");
}

bool gemm_fp8_rows_accumulate(const uint8_t* x8, const float* x_scales, const uint8_t* w8, const float* w_scales,
                              int32_t rows, int32_t n_out, int32_t k, float* y, cudaStream_t stream, int32_t ldy) {
  if (rows == 0 || n_out == 0) return true;
  if (ldy == 0) ldy = n_out;
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (k % 16 != 0 || !aligned(x8) || !aligned(w8) || !aligned(x_scales) || !aligned(w_scales) || !aligned(y)) return false;
  thread_local ThreadLt lt;
  const Fp8Plan& p = lt.plan(rows, n_out, k, ldy, w8, x8, y, w_scales, x_scales);
  if (!p.supported) return false;
  check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)),
             "FP8 GEMM A scale pointer");
  check_blas(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales)),
             "FP8 GEMM B scale pointer");
  const float alpha = 1.0f, beta = 1.0f;
  ThreadBlas& blas = thread_blas();  // the same workspace as the bf16 GEMMs: same stream, one after the other
  check_blas(cublasLtMatmul(lt.handle, p.desc, &alpha, w8, p.a, x8, p.b, &beta, y, p.c, y, p.c, &p.algo, blas.workspace,
                            kWorkspaceBytes, stream),
             "cublasLtMatmul (FP8 low term)");
  return true;
}

}  // namespace imp::cuda
