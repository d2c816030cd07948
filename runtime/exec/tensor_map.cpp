#include "runtime/exec/tensor_map.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "ir/error.h"

namespace mlpc::runtime {
namespace {

static_assert(sizeof(TmaDesc) == sizeof(CUtensorMap) && alignof(TmaDesc) == alignof(CUtensorMap));

using EncodeTiled = decltype(&cuTensorMapEncodeTiled);

EncodeTiled encoder() {
  static EncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    cudaError_t st = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                      cudaEnableDefault, &found);
    if (st != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr)
      throw Error(fmt::format("cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled): {}",
                              st != cudaSuccess ? cudaGetErrorString(st) : "symbol not found"));
    return reinterpret_cast<EncodeTiled>(p);
  }();
  return fn;
}

CUtensorMapDataType tma_type(ir::DType t) {
  switch (t) {
    case ir::DType::F32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case ir::DType::F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case ir::DType::BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

}  // namespace

TmaDesc tma_desc_2d(const void* base, ir::DType dtype, int64_t rows, int64_t cols, int box_rows,
                    int box_cols) {
  const int64_t elem = static_cast<int64_t>(ir::dtype_size(dtype));
  const std::string what = fmt::format("TMA descriptor for a {}[{}, {}] matrix (box {}x{})",
                                       ir::dtype_name(dtype), rows, cols, box_rows, box_cols);
  if (box_cols * elem != 128 || (cols * elem) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(base) % 16 != 0 || rows <= 0 || cols <= 0)
    throw Error(what + ": needs 128-byte box rows, 16-byte aligned rows and base, and no empty dim");
  TmaDesc desc{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols * elem)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t steps[2] = {1, 1};
  CUresult r = encoder()(reinterpret_cast<CUtensorMap*>(&desc), tma_type(dtype), 2,
                         const_cast<void*>(base), dims, strides, box, steps,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw Error(fmt::format("{}: cuTensorMapEncodeTiled returned {}", what, static_cast<int>(r)));
  return desc;
}

}  // namespace mlpc::runtime
