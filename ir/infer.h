// Shape and dtype inference: the one place that says which operand types an op accepts and what
// it produces. The builder, the parser and the verifier all call it.
#pragma once

#include <span>
#include <string>

#include "ir/graph.h"

namespace mlpc::ir {

struct Inferred {
  TensorType type;
  std::string error;  // empty when the operands are acceptable
};

// `declared` is the type written in the text or passed to the builder; it supplies what the op
// cannot infer (the type of input/param, the target dtype of cast). `body` is the region of a
// fused.pointwise node; `epilogue` that of a matmul, which says which operands follow x and W.
Inferred infer_type(Op op, std::span<const TensorType> operands, const TensorType& declared,
                    const Graph* body = nullptr, const GemmEpilogue& epilogue = {});

// Binary pointwise broadcasting: equal shapes, or one side is a row vector [N] matching the
// other's last dim. Returns the result shape, or nullptr when they do not broadcast.
const Shape* broadcast_shape(const Shape& a, const Shape& b);

}  // namespace mlpc::ir
