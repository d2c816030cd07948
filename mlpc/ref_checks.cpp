#include "mlpc/ref_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "ir/type.h"

namespace mlpc::api {
namespace {

std::string describe(DType dtype, const std::vector<int64_t>& dims) {
  return fmt::format("{}[{}]", ir::dtype_name(dtype), fmt::join(dims, ", "));
}

}  // namespace

std::string describe(const TensorInfo& info) {
  return ir::to_string(ir::TensorType{info.dtype, ir::Shape{info.dims}});
}

size_t ref_bytes(const TensorRef& r) {
  size_t n = ir::dtype_size(r.dtype);
  for (int64_t d : r.shape) n *= static_cast<size_t>(d);
  return n;
}

void check_refs(std::string_view what, const std::vector<TensorInfo>& infos,
                const std::vector<TensorRef>& refs, std::optional<int64_t>& batch) {
  if (refs.size() != infos.size()) {
    std::vector<std::string> names;
    for (const TensorInfo& i : infos) names.push_back(i.name);
    throw Error(fmt::format("expected {} {}{} ({}), got {}", infos.size(), what,
                            infos.size() == 1 ? "" : "s", fmt::join(names, ", "), refs.size()));
  }
  for (size_t k = 0; k < refs.size(); ++k) {
    const TensorInfo& info = infos[k];
    const TensorRef& r = refs[k];
    if (!r.data) throw Error(fmt::format("{} {}: null pointer", what, info.name));
    if (reinterpret_cast<uintptr_t>(r.data) % 16 != 0)
      throw Error(fmt::format("{} {}: pointer {} is not 16-byte aligned", what, info.name, r.data));
    bool fits = r.dtype == info.dtype && r.shape.size() == info.dims.size();
    for (size_t d = 0; fits && d < r.shape.size(); ++d)
      fits = info.dims[d] == kBatch ? r.shape[d] >= 0 : r.shape[d] == info.dims[d];
    if (!fits)
      throw Error(fmt::format("{} {}: expected {}, got {}", what, info.name, describe(info),
                              describe(r.dtype, r.shape)));
    for (size_t d = 0; d < r.shape.size(); ++d) {
      if (info.dims[d] != kBatch) continue;
      if (!batch) batch = r.shape[d];
      if (r.shape[d] != *batch)
        throw Error(fmt::format("{} {}: batch {} differs from the {} rows of the tensors before",
                                what, info.name, r.shape[d], *batch));
    }
  }
}

void check_no_overlap(const std::vector<TensorInfo>& inputs, const std::vector<TensorRef>& in,
                      const std::vector<TensorInfo>& outputs, const std::vector<TensorRef>& out) {
  auto overlap = [](const TensorRef& a, const TensorRef& b) {
    const auto* pa = static_cast<const char*>(a.data);
    const auto* pb = static_cast<const char*>(b.data);
    const size_t na = ref_bytes(a), nb = ref_bytes(b);
    return na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
  };
  for (size_t o = 0; o < out.size(); ++o) {
    for (size_t i = 0; i < in.size(); ++i)
      if (overlap(out[o], in[i]))
        throw Error(fmt::format("output {} overlaps input {}", outputs[o].name, inputs[i].name));
    for (size_t p = 0; p < o; ++p)
      if (overlap(out[o], out[p]))
        throw Error(fmt::format("output {} overlaps output {}", outputs[o].name, outputs[p].name));
  }
}

void check_param(const TensorInfo& info, DType dtype, const std::vector<int64_t>& shape,
                 const void* data, std::vector<DType> also) {
  if (dtype != info.dtype && std::find(also.begin(), also.end(), dtype) == also.end())
    throw Error(fmt::format("param {}: expected {} values{}, got {}", info.name,
                            ir::dtype_name(info.dtype),
                            also.empty() ? "" : fmt::format(" (or {})", ir::dtype_name(also[0])),
                            ir::dtype_name(dtype)));
  if (shape != info.dims)
    throw Error(fmt::format("param {}: expected shape [{}], got [{}]", info.name,
                            fmt::join(info.dims, ", "), fmt::join(shape, ", ")));
  if (!data) throw Error(fmt::format("param {}: null pointer", info.name));
}

}  // namespace mlpc::api
