// The host-side checks of what a caller hands Module::run and the param setters: counts, null
// pointers, alignment, dtypes, shapes and one batch for all, overlaps. Pure (no CUDA), so they
// hold on a machine without a GPU and each names the input, output or param at fault.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "mlpc/mlpc.h"

namespace mlpc::api {

// "bf16[M, 768]": an info's type as the IR prints it.
std::string describe(const TensorInfo& info);

// Checks `refs` against `infos` (`what`: "input" or "output"): the count, then each ref's
// pointer (non-null, 16-byte aligned), dtype and shape, the batch dim any size but the same
// for all. `batch` carries the batch across calls: empty until a ref with the batch dim fixes it.
void check_refs(std::string_view what, const std::vector<TensorInfo>& infos,
                const std::vector<TensorRef>& refs, std::optional<int64_t>& batch);

// Throws when an output's bytes overlap an input's or another output's.
void check_no_overlap(const std::vector<TensorInfo>& inputs, const std::vector<TensorRef>& in,
                      const std::vector<TensorInfo>& outputs, const std::vector<TensorRef>& out);

// A param's value: its dtype (or `also`, a dtype the setter converts from) and its exact dims.
void check_param(const TensorInfo& info, DType dtype, const std::vector<int64_t>& shape,
                 const void* data, std::vector<DType> also = {});

// Bytes of a ref whose shape already passed check_refs.
size_t ref_bytes(const TensorRef& r);

}  // namespace mlpc::api
