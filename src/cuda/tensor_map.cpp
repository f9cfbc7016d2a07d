#include "cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "cuda/check.h"

namespace imp::cuda {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    IMP_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      throw Error("the CUDA driver has no cuTensorMapEncodeTiled (bulk tensor copies need driver 525 or newer)");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

}  // namespace

CUtensorMap strip_tensor_map(const uint8_t* pool, int32_t num_slots, uint64_t slot_bytes, const model::SlotProjection& projection,
                             bool scales, int32_t box_strips) {
  const uint64_t unit = scales ? 64 : 512;
  const uint64_t supertiles = static_cast<uint64_t>(projection.supertiles()), strips = static_cast<uint64_t>(projection.rows / 16);
  const cuuint64_t dims[4] = {unit / 4, supertiles, strips, static_cast<cuuint64_t>(num_slots)};
  const cuuint64_t strides[3] = {unit, unit * supertiles, slot_bytes};  // bytes, of dims 1-3
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(unit / 4), 1, static_cast<cuuint32_t>(box_strips), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  CUtensorMap map;
  const CUresult status =
      encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT32, 4, const_cast<uint8_t*>(pool) + (scales ? projection.scales : projection.codes),
                dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw Error("cuTensorMapEncodeTiled refused the expert pool's " + std::string(scales ? "scales" : "codes") +
                " map (error " + std::to_string(static_cast<int>(status)) + "): pool and slot size must be 16-byte aligned");
  }
  return map;
}

CUtensorMap bf16_rows_tensor_map(const void* data, uint64_t rows, uint32_t width, uint32_t stride, uint32_t box_rows,
                                 const char* what) {
  const cuuint64_t dims[2] = {width, rows};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride) * 2};  // bytes, of dim 1
  const cuuint32_t box[2] = {64, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMap map;
  const CUresult status = encoder()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(data), dims, strides, box,
                                    element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw Error("cuTensorMapEncodeTiled refused the " + std::string(what) + " map (error " +
                std::to_string(static_cast<int>(status)) + "): it must be 16-byte aligned with rows a multiple of 8 bf16 apart");
  }
  return map;
}

CUtensorMap kv_tensor_map(const void* cache, uint64_t rows, uint32_t width, uint32_t box_rows) {
  return bf16_rows_tensor_map(cache, rows, width, width, box_rows, "KV cache");
}

}  // namespace imp::cuda
