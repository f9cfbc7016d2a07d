// Can the low term of the split-bf16 prefill GEMM run in FP8? y = W.hi (bf16 GEMM) + W8.lo8 (e4m3 GEMM with
// per-output-row weight scales and per-token activation scales, cuBLASLt OUTER_VEC_32F), against the two bf16
// GEMMs of today. Prints whether cuBLASLt finds an algorithm for each scale mode, the time of each GEMM (median
// of 20, events) and the error of the FP8 term against a double-precision product of the same quantized inputs.
// Build: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a bench/experiments/fp8_lo_probe.cu \
//          -lcublasLt -lcublas -o build/exp/fp8_lo_probe
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("cuda %s at %d\n", cudaGetErrorString(e), __LINE__); std::exit(1); } } while (0)
#define BK(x) do { cublasStatus_t s = (x); if (s != CUBLAS_STATUS_SUCCESS) { std::printf("cublas %d at %d\n", int(s), __LINE__); return -1.0f; } } while (0)

template <typename F>
float time_ms(F f) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> t;
  for (int i = 0; i < 23; ++i) {
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (i >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// D [n_out, rows] col-major (= y [rows, n_out] row-major) (+)= scale(W8 [n_out, k] row-major) . scale(x8 [rows, k]).
float fp8_gemm(cublasLtHandle_t lt, bool outer_vec, const __nv_fp8_e4m3* w8, const float* w_scale, const __nv_fp8_e4m3* x8,
               const float* x_scale, int n_out, int rows, int k, float* y, void* ws, size_t ws_bytes, bool run) {
  cublasLtMatmulDesc_t desc;
  BK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
  const int32_t mode = outer_vec ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
  BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
  BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
  BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof(w_scale)));
  BK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale, sizeof(x_scale)));
  cublasLtMatrixLayout_t la, lb, lc;
  BK(cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, k, n_out, k));
  BK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, k, rows, k));
  BK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n_out, rows, n_out));
  cublasLtMatmulPreference_t pref;
  BK(cublasLtMatmulPreferenceCreate(&pref));
  BK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  cublasLtMatmulHeuristicResult_t h{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 1, &h, &found);
  std::printf("  %s scales: heuristic status %d, algorithms %d\n", outer_vec ? "outer-vector" : "scalar", int(hs), found);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) return -1.0f;
  const float alpha = 1.0f, beta = 1.0f;
  auto go = [&] { cublasLtMatmul(lt, desc, &alpha, w8, la, x8, lb, &beta, y, lc, y, lc, &h.algo, ws, ws_bytes, 0); };
  if (!run) {
    go();
    return 0.0f;
  }
  return time_ms(go);
}

int main() {
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  size_t ws_bytes = size_t{32} << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  cublasSetWorkspace(handle, ws, ws_bytes);
  struct Shape { const char* name; int n_out, k; };
  const int rows = 4096;
  for (const Shape s : {Shape{"gdn in_proj", 16480, 2560}, Shape{"gdn out_proj", 2560, 6144}, Shape{"attention o_proj", 2560, 6144}}) {
    std::printf("%s: %d x %d, %d tokens\n", s.name, s.n_out, s.k, rows);
    const size_t nw = size_t(s.n_out) * s.k, nx = size_t(rows) * s.k;
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<__nv_bfloat16> w(nw), x(nx);
    std::vector<__nv_fp8_e4m3> w8(nw), x8(nx);
    std::vector<float> ws_row(s.n_out), xs_row(rows);
    for (int r = 0; r < s.n_out; ++r) {
      float m = 0;
      std::vector<float> row(s.k);
      for (int i = 0; i < s.k; ++i) { row[i] = 0.02f * nd(rng); m = std::max(m, std::fabs(row[i])); }
      ws_row[r] = m / 448.0f;
      for (int i = 0; i < s.k; ++i) { w[size_t(r) * s.k + i] = __float2bfloat16(row[i]); w8[size_t(r) * s.k + i] = __nv_fp8_e4m3(row[i] / ws_row[r]); }
    }
    for (int t = 0; t < rows; ++t) {
      float m = 0;
      std::vector<float> row(s.k);
      for (int i = 0; i < s.k; ++i) { row[i] = 1e-3f * nd(rng); m = std::max(m, std::fabs(row[i])); }
      xs_row[t] = m / 448.0f;
      for (int i = 0; i < s.k; ++i) { x[size_t(t) * s.k + i] = __float2bfloat16(row[i]); x8[size_t(t) * s.k + i] = __nv_fp8_e4m3(row[i] / xs_row[t]); }
    }
    __nv_bfloat16 *dw, *dx;
    __nv_fp8_e4m3 *dw8, *dx8;
    float *dws, *dxs, *dy, *dscal;
    CK(cudaMalloc(&dw, nw * 2)); CK(cudaMalloc(&dx, nx * 2)); CK(cudaMalloc(&dw8, nw)); CK(cudaMalloc(&dx8, nx));
    CK(cudaMalloc(&dws, 4 * s.n_out)); CK(cudaMalloc(&dxs, 4 * rows)); CK(cudaMalloc(&dy, 4 * size_t(rows) * s.n_out));
    CK(cudaMalloc(&dscal, 8));
    CK(cudaMemcpy(dw, w.data(), nw * 2, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dx, x.data(), nx * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw8, w8.data(), nw, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dx8, x8.data(), nx, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dws, ws_row.data(), 4 * s.n_out, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dxs, xs_row.data(), 4 * rows, cudaMemcpyHostToDevice));
    const float one[2] = {1.0f, 1.0f};
    CK(cudaMemcpy(dscal, one, 8, cudaMemcpyHostToDevice));
    const float alpha = 1.0f, beta0 = 0.0f, beta1 = 1.0f;
    const float bz = time_ms([&] { cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n_out, rows, s.k, &alpha, dw, CUDA_R_16BF, s.k, dx, CUDA_R_16BF, s.k, &beta0, dy, CUDA_R_32F, s.n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); });
    const float badd = time_ms([&] { cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, s.n_out, rows, s.k, &alpha, dw, CUDA_R_16BF, s.k, dx, CUDA_R_16BF, s.k, &beta1, dy, CUDA_R_32F, s.n_out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); });
    std::printf("  bf16 GEMM beta 0: %.3f ms, beta 1: %.3f ms\n", bz, badd);
    const float scalar = fp8_gemm(lt, false, dw8, dscal, dx8, dscal + 1, s.n_out, rows, s.k, dy, ws, ws_bytes, true);
    std::printf("  fp8 scalar scales, beta 1: %.3f ms\n", scalar);
    // Outer-vector scales: time, then the error of one product against double precision.
    const float outer = fp8_gemm(lt, true, dw8, dws, dx8, dxs, s.n_out, rows, s.k, dy, ws, ws_bytes, true);
    std::printf("  fp8 outer-vector scales, beta 1: %.3f ms\n", outer);
    for (int outer_vec = 0; outer_vec < 2; ++outer_vec) {  // the values of one product, sampled, against double
      if ((outer_vec ? outer : scalar) < 0.0f) continue;
      CK(cudaMemset(dy, 0, 4 * size_t(rows) * s.n_out));
      fp8_gemm(lt, outer_vec, dw8, outer_vec ? dws : dscal, dx8, outer_vec ? dxs : dscal + 1, s.n_out, rows, s.k, dy, ws, ws_bytes, false);
      std::vector<float> y(size_t(rows) * s.n_out);
      CK(cudaMemcpy(y.data(), dy, 4 * y.size(), cudaMemcpyDeviceToHost));
      double max_err = 0, max_ref = 0;
      for (int sample = 0; sample < 2000; ++sample) {
        const int t = (sample * 7919) % rows, r = (sample * 104729) % s.n_out;
        double ref = 0;
        for (int i = 0; i < s.k; ++i) {
          ref += double(float(w8[size_t(r) * s.k + i])) * double(float(x8[size_t(t) * s.k + i]));
        }
        if (outer_vec) ref *= double(ws_row[r]) * double(xs_row[t]);
        max_err = std::max(max_err, std::fabs(ref - double(y[size_t(t) * s.n_out + r])));
        max_ref = std::max(max_ref, std::fabs(ref));
      }
      std::printf("  fp8 %s: max |err| %.3g of max |ref| %.3g over 2000 samples\n", outer_vec ? "outer-vector" : "scalar", max_err, max_ref);
    }
    CK(cudaDeviceSynchronize());
    cudaFree(dw); cudaFree(dx); cudaFree(dw8); cudaFree(dx8); cudaFree(dws); cudaFree(dxs); cudaFree(dy); cudaFree(dscal);
  }
  return 0;
}
