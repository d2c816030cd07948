#include "io/bind.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "io/file_bytes.h"
#include "io/safetensors.h"
#include "ir/error.h"
#include "host/random_init.h"

namespace mlpc::io {
namespace {

// `data` converted to `dtype`; `what` names the tensor in the error when a value overflows it.
std::vector<double> convert(std::vector<double> data, ir::DType dtype, const std::string& what) {
  for (size_t i = 0; i < data.size(); ++i) {
    double r = runtime::round_to(dtype, data[i]);
    if (std::isfinite(data[i]) && !std::isfinite(r))
      throw Error(fmt::format("{}: element {} ({:g}) does not fit in {}", what, i, data[i],
                              ir::dtype_name(dtype)));
    data[i] = r;
  }
  return data;
}

std::string shape_text(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

}  // namespace

void bind_weights(const ir::Graph& g, std::string_view file_bytes, const std::string& path,
                  NamedTensors& values) {
  std::vector<SafetensorsEntry> entries = parse_safetensors(file_bytes, path);
  std::map<std::string_view, const SafetensorsEntry*> by_name;
  for (const SafetensorsEntry& e : entries) by_name[e.name] = &e;

  // Checks first, for every tensor, so nothing is decoded from a file that will be refused.
  for (ir::NodeId id : g.params()) {
    const ir::Node& p = g.node(id);
    auto it = by_name.find(p.name);
    if (it == by_name.end())
      throw Error(fmt::format("{}: error: no tensor {} for param %{} ({}) of @{}", path,
                              quote_name(p.name), p.name, ir::to_string(p.type), g.name));
    std::vector<int64_t> want = runtime::concrete_dims(p.type.shape, 1);
    if (it->second->shape != want)
      throw Error(fmt::format("{}: error: tensor {} has shape {} but param %{} of @{} is {}", path,
                              quote_name(p.name), shape_text(it->second->shape), p.name, g.name,
                              ir::to_string(p.type)));
  }
  std::set<std::string_view> params;
  for (ir::NodeId id : g.params()) params.insert(g.node(id).name);
  for (const SafetensorsEntry& e : entries) {
    if (!params.count(e.name))
      throw Error(fmt::format("{}: error: tensor {} is not a param of @{} (it has {} params; "
                              "export only the graph's weights)",
                              path, quote_name(e.name), g.name, g.params().size()));
  }
  for (ir::NodeId id : g.params()) {
    const ir::Node& p = g.node(id);
    runtime::HostTensor t = decode_tensor(file_bytes, *by_name.at(p.name));
    t.data = convert(std::move(t.data), p.type.dtype,
                     fmt::format("{}: error: tensor {}", path, quote_name(p.name)));
    t.dtype = p.type.dtype;
    values[p.name] = std::move(t);
  }
}

void load_weights(const ir::Graph& g, const std::string& path, NamedTensors& values) {
  std::string bytes = read_file_bytes(path);
  bind_weights(g, bytes, path, values);
}

void save_weights(const ir::Graph& g, const NamedTensors& values, const std::string& path) {
  NamedTensors params;
  for (ir::NodeId id : g.params()) {
    const std::string& name = g.node(id).name;
    auto it = values.find(name);
    MLPC_ASSERT(it != values.end(), "no value for param " + name);
    params[name] = it->second;
  }
  write_file_bytes(path, encode_safetensors(params));
}

std::optional<int64_t> batch_of(const ir::Graph& g, ir::NodeId input, const NpyArray& a) {
  const ir::Shape& s = g.node(input).type.shape;
  if (!s.has_batch() || a.shape.empty() || a.shape.size() != s.dims.size()) return std::nullopt;
  return a.shape[0];
}

runtime::HostTensor input_from_npy(const ir::Graph& g, ir::NodeId input, const NpyArray& a,
                                   const std::string& path) {
  const ir::Node& x = g.node(input);
  const std::vector<int64_t>& want = x.type.shape.dims;
  bool fits = a.shape.size() == want.size();
  for (size_t i = 0; fits && i < want.size(); ++i)
    fits = want[i] == ir::kBatchDim ? a.shape[i] >= 1 : a.shape[i] == want[i];
  if (!fits)
    throw Error(fmt::format("{}: error: the array has shape ({}) but input %{} of @{} is {}", path,
                            fmt::join(a.shape, ", "), x.name, g.name,
                            ir::to_string(x.type, g.batch_symbol)));
  runtime::HostTensor t{x.type.dtype, a.shape, {}};
  t.data = convert(a.data, x.type.dtype, fmt::format("{}: error: input %{}", path, x.name));
  return t;
}

}  // namespace mlpc::io
