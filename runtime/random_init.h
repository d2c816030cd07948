// Seeded weights and inputs. Counter-based: element i of tensor NAME depends only on (seed, NAME,
// i), so runs are reproducible and eager, compiled and the reference all see the same numbers.
// Weights follow nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)); inputs are
// standard normal. Values are rounded to the tensor's dtype.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "runtime/host_tensor.h"

namespace mlpc::runtime {

inline constexpr uint64_t kDefaultSeed = 0x6d6c7063;  // "mlpc"

HostTensor random_param(const ir::Graph& g, ir::NodeId param, uint64_t seed = kDefaultSeed);
HostTensor random_input(const ir::Graph& g, ir::NodeId input, int64_t batch,
                        uint64_t seed = kDefaultSeed);

// The concrete dims of a value's type with the batch dim bound.
std::vector<int64_t> concrete_dims(const ir::Shape& s, int64_t batch);

}  // namespace mlpc::runtime
