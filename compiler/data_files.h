// The files `mlpc run` and `mlpc bench` read and write: --weights FILE.safetensors (bound to the
// graph's params by name), --input FILE.npy (one per graph input, in argument order; the batch
// is its leading dim), --output FILE.npy (one per graph output) and --save-weights
// FILE.safetensors (the params the run used). Formats and conversions: io/bind.h, io/npy.h.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/check.h"
#include "io/npy.h"
#include "ir/graph.h"

namespace mlpc {

struct DataFiles {
  std::string weights, save_weights;
  std::vector<std::string> inputs, outputs;
};

struct InputArrays {
  std::vector<io::NpyArray> arrays;  // one per graph input, or none
  std::optional<int64_t> batch;      // the batch they fix
};

// Reads the --input arrays and checks them against `g` (count, shapes, one batch for all), and
// checks the --output count, so that a mismatch fails before anything runs.
InputArrays read_inputs(const ir::Graph& g, const DataFiles& files);

// The batch to run: the inputs' when they fix one (an explicit --batch, `asked` > 0, must
// agree), else `fallback`.
int64_t resolve_batch(int64_t asked, const InputArrays& in, int64_t fallback);

// Inputs and params for one forward at `batch`: the given arrays and weights, seeded random
// values for the rest. Writes --save-weights.
Values make_values(const ir::Graph& g, int64_t batch, uint64_t seed, const DataFiles& files,
                   const InputArrays& in);

// Writes output i to files.outputs[i] (when --output was given).
void write_outputs(const std::vector<runtime::HostTensor>& outs, const DataFiles& files);

}  // namespace mlpc
