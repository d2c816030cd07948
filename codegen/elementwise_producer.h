// Plan rewrites that change how a GEMM's x is stored (3xTF32 parts, a transposed layout) can
// have the pointwise kernel that computes x store it so, instead of adding a kernel of their
// own: when x is an intermediate that nothing but the one GEMM reads, and the kernel writing it
// is an elementwise one generated from a fused.pointwise region (which can be generated again,
// with other store options).
#pragma once

#include <cstddef>
#include <optional>

#include "codegen/plan.h"
#include "codegen/pointwise_kernel.h"
#include "ir/graph.h"

namespace mlpc::codegen {

// How many steps read buffer `b` (a step reading it twice counts twice).
int readers(const Plan& plan, int b);

struct ElementwiseProducer {
  size_t step = 0;                  // the kernel's index in plan.steps
  const ir::Node* region = nullptr;  // its fused.pointwise node in the graph
};
// The kernel writing `x`, when it could store x differently: see above. `g` is the graph `plan`
// was built from.
std::optional<ElementwiseProducer> elementwise_producer(const Plan& plan, const ir::Graph& g,
                                                        int x);

// The producer's kernel generated again with `options` (how it stores x), under the same name,
// reading the same inputs and writing the same output buffer.
KernelStep regenerated(const Plan& plan, const ir::Graph& g, const ElementwiseProducer& producer,
                       const PointwiseOptions& options);

}  // namespace mlpc::codegen
