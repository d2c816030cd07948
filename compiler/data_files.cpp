#include "compiler/data_files.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include <filesystem>

#include "io/bind.h"
#include "ir/error.h"
#include "host/random_init.h"

namespace mlpc {
namespace {

constexpr int64_t kMaxBatch = int64_t{1} << 24;  // as --batch

std::string value_names(const ir::Graph& g, const std::vector<ir::NodeId>& ids) {
  std::string s;
  for (ir::NodeId id : ids) s += (s.empty() ? "%" : ", %") + g.node(id).name;
  return s;
}

// One warning for a tensor read from a file that holds NaN or Inf: runs go on (a user may
// mean it), but never silently.
void warn_non_finite(const std::string& what, const runtime::HostTensor& t) {
  int64_t count = 0, first = -1;
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++count;
    }
  if (first < 0) return;
  std::vector<int64_t> at(t.dims.size());
  for (size_t d = t.dims.size(), rest = static_cast<size_t>(first); d-- > 0;) {
    const size_t extent = static_cast<size_t>(std::max<int64_t>(t.dims[d], 1));
    at[d] = static_cast<int64_t>(rest % extent);
    rest /= extent;
  }
  const double v = t.data[static_cast<size_t>(first)];
  fmt::print(stderr, "mlpc: warning: {} holds {} at [{}] ({} non-finite value{})\n", what,
             std::isnan(v) ? "NaN" : (v > 0 ? "Inf" : "-Inf"), fmt::join(at, ", "), count,
             count == 1 ? "" : "s");
}

}  // namespace

InputArrays read_inputs(const ir::Graph& g, const DataFiles& files) {
  const std::vector<ir::NodeId> inputs = g.inputs(), outputs = g.outputs();
  if (!files.inputs.empty() && files.inputs.size() != inputs.size())
    throw Error(fmt::format("@{} takes {} input(s) ({}): give one --input FILE.npy for each, in "
                            "that order ({} given)",
                            g.name, inputs.size(), value_names(g, inputs), files.inputs.size()));
  if (!files.outputs.empty() && files.outputs.size() != outputs.size())
    throw Error(fmt::format("@{} returns {} output(s): give one --output FILE.npy for each ({} "
                            "given)",
                            g.name, outputs.size(), files.outputs.size()));
  // A folder that is not there fails now, not after a long run.
  for (const std::string& path : files.outputs) {
    std::filesystem::path dir = std::filesystem::path(path).parent_path();
    if (!std::filesystem::is_directory(dir.empty() ? "." : dir))
      throw Error(fmt::format("{}: error: cannot write: no folder {}", path, dir.string()));
  }
  InputArrays in;
  for (size_t i = 0; i < files.inputs.size(); ++i) {
    const std::string& path = files.inputs[i];
    in.arrays.push_back(io::read_npy(path));
    io::input_from_npy(g, inputs[i], in.arrays.back(), path);  // checks the shape, then dropped
    std::optional<int64_t> b = io::batch_of(g, inputs[i], in.arrays.back());
    if (!b) continue;
    if (*b > kMaxBatch)
      throw Error(fmt::format("{}: error: {} rows, more than the {} mlpc runs", path, *b, kMaxBatch));
    if (in.batch && *in.batch != *b)
      throw Error(fmt::format("{}: error: {} rows, but {} has {}: the inputs disagree on the batch",
                              path, *b, files.inputs.front(), *in.batch));
    in.batch = b;
  }
  return in;
}

int64_t resolve_batch(int64_t asked, const InputArrays& in, int64_t fallback) {
  if (!in.batch) return fallback;
  if (asked > 0 && asked != *in.batch)
    throw Error(fmt::format("--batch {} but the --input arrays have {} rows: leave --batch out "
                            "(the inputs set it)",
                            asked, *in.batch));
  return *in.batch;
}

Values make_values(const ir::Graph& g, int64_t batch, uint64_t seed, const DataFiles& files,
                   const InputArrays& in) {
  Values v;
  const std::vector<ir::NodeId> inputs = g.inputs();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& name = g.node(inputs[i]).name;
    if (in.arrays.empty()) {
      v[name] = runtime::random_input(g, inputs[i], batch, seed);
      continue;
    }
    v[name] = io::input_from_npy(g, inputs[i], in.arrays[i], files.inputs[i]);
    warn_non_finite(fmt::format("{}: input %{}", files.inputs[i], name), v[name]);
  }
  if (!files.weights.empty()) {
    io::load_weights(g, files.weights, v);
    for (ir::NodeId id : g.params())
      warn_non_finite(fmt::format("{}: tensor {}", files.weights, g.node(id).name),
                      v.at(g.node(id).name));
  } else
    for (ir::NodeId id : g.params()) v[g.node(id).name] = runtime::random_param(g, id, seed);
  if (!files.save_weights.empty()) io::save_weights(g, v, files.save_weights);
  return v;
}

void write_outputs(const std::vector<runtime::HostTensor>& outs, const DataFiles& files) {
  MLPC_ASSERT(files.outputs.empty() || files.outputs.size() == outs.size(),
              "--output count was checked by read_inputs");
  for (size_t i = 0; i < files.outputs.size(); ++i) io::write_npy(files.outputs[i], outs[i]);
}

}  // namespace mlpc
