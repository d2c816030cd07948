// Seeded weights and inputs. Counter-based: element i of tensor NAME depends only on (seed, NAME,
// i), so runs are reproducible and eager, compiled and the reference all see the same numbers.
// Weights follow nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)); a norm's weight
// is 1 and its bias 0, as nn.RMSNorm / nn.LayerNorm start; inputs are standard normal. Values
// are rounded to the tensor's dtype.
#pragma once

#include <cstdint>

#include "ir/graph.h"
#include "host/host_tensor.h"

namespace mlpc::runtime {

inline constexpr uint64_t kDefaultSeed = 0x6d6c7063;  // "mlpc"

HostTensor random_param(const ir::Graph& g, ir::NodeId param, uint64_t seed = kDefaultSeed);
HostTensor random_input(const ir::Graph& g, ir::NodeId input, int64_t batch,
                        uint64_t seed = kDefaultSeed);

// `count` values of `dtype`, uniform in [-scale, scale], as device bytes: operands for timing.
// Counter-based (value i from (seed, i)), so every value is its own, as in a model's tensors (a
// short pattern repeated would make the data periodic, and under a GPU's power cap a GEMM's
// clock depends on the bits it toggles); drawn in float on every core, an order of magnitude
// cheaper a value than random_param's doubles.
std::vector<uint8_t> random_bytes(ir::DType dtype, int64_t count, double scale, uint64_t seed);

// The concrete dims of a value's type with the batch dim bound.
std::vector<int64_t> concrete_dims(const ir::Shape& s, int64_t batch);

}  // namespace mlpc::runtime
