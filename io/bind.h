// Files bound to a graph: a safetensors file to its params (by name), .npy arrays to its inputs.
// Every mismatch is one mlpc::Error "PATH: error: ..." naming the tensor.
//
// Weights: every param of the graph must be in the file, with the param's shape; a tensor in the
// file that is no param of the graph is an error too (a file for another graph, or a renamed
// layer, should not half-bind). A tensor stored in another dtype than the param's is converted:
// exactly when widening (bf16/f16 -> f32), rounded to nearest even when narrowing (as PyTorch's
// .to() rounds), and refused when a finite value overflows the param's dtype (f32 -> f16 above
// 65504). So an f32 export runs as is under `--dtype bf16`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "io/npy.h"
#include "ir/graph.h"
#include "host/host_tensor.h"

namespace mlpc::io {

using NamedTensors = std::map<std::string, runtime::HostTensor>;

// Replaces the value of every param of `g` in `values` by the tensor of that name in the
// safetensors file held in `file_bytes`.
void bind_weights(const ir::Graph& g, std::string_view file_bytes, const std::string& path,
                  NamedTensors& values);
void load_weights(const ir::Graph& g, const std::string& path, NamedTensors& values);

// Writes the params of `g` (their values in `values`, in their dtypes) as a safetensors file.
void save_weights(const ir::Graph& g, const NamedTensors& values, const std::string& path);

// The batch an array fixes for `input`: its leading dim when the input has the batch dim.
std::optional<int64_t> batch_of(const ir::Graph& g, ir::NodeId input, const NpyArray& a);

// `input`'s value from an array: the array's shape must be the input's (the batch dim any
// size); values are converted to the input's dtype as weights are (bf16 inputs: round f32/f64).
runtime::HostTensor input_from_npy(const ir::Graph& g, ir::NodeId input, const NpyArray& a,
                                   const std::string& path);

}  // namespace mlpc::io
