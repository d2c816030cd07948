#include "compiler/data_files.h"

#include <fmt/format.h>

#include <filesystem>

#include "io/bind.h"
#include "ir/error.h"
#include "runtime/random_init.h"

namespace mlpc {
namespace {

constexpr int64_t kMaxBatch = int64_t{1} << 24;  // as --batch

std::string value_names(const ir::Graph& g, const std::vector<ir::NodeId>& ids) {
  std::string s;
  for (ir::NodeId id : ids) s += (s.empty() ? "%" : ", %") + g.node(id).name;
  return s;
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
    v[name] = in.arrays.empty() ? runtime::random_input(g, inputs[i], batch, seed)
                                : io::input_from_npy(g, inputs[i], in.arrays[i], files.inputs[i]);
  }
  if (!files.weights.empty())
    io::load_weights(g, files.weights, v);
  else
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
