// The CPU reference interpreter: what "correct" means. Evaluates a graph (fused or not) in fp64
// from the same rounded inputs and params the GPU sees; only an explicit cast rounds. Every op in
// mlpc maps row r of its input to row r of its output, so the reference may run on any subset of
// the batch's rows (take_rows) and be compared with the same rows of a GPU result.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "host/host_tensor.h"

namespace mlpc::runtime {

// Called before each top-level node is evaluated: (nodes done, nodes in all, the next node).
using ReferenceProgress = std::function<void(size_t, size_t, const ir::Node&)>;

// `values` binds every input and param by name. Returns the graph's outputs.
std::vector<HostTensor> reference_forward(const ir::Graph& g,
                                          const std::map<std::string, HostTensor>& values,
                                          const ReferenceProgress& progress = {});

// The rows `rows` of `t` along its leading dim.
HostTensor take_rows(const HostTensor& t, const std::vector<int64_t>& rows);

}  // namespace mlpc::runtime
