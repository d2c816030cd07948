// Facts of the op table, dtypes and shapes that every other layer relies on.
#include <catch2/catch.hpp>

#include "ir/dtype.h"
#include "ir/op.h"
#include "ir/type.h"

using namespace mlpc::ir;

TEST_CASE("every op name parses back to its op", "[ir]") {
  for (int i = 0; i < kNumOps; ++i) {
    Op op = static_cast<Op>(i);
    INFO(op_name(op));
    CHECK(parse_op(op_name(op)) == op);
  }
  CHECK(kNumOps == static_cast<int>(Op::Return) + 1);  // Return is the table's last entry
  CHECK_FALSE(parse_op("foo").has_value());
  CHECK_FALSE(parse_op("").has_value());
}

TEST_CASE("op arity and kind", "[ir]") {
  CHECK(op_arity(Op::MatMul) == -1);  // x, W, then its epilogue's bias and residual
  CHECK(op_kind(Op::MatMul) == OpKind::Gemm);
  CHECK(op_arity(Op::GeluTanh) == 1);
  CHECK(is_pointwise(Op::GeluTanh));
  CHECK(op_arity(Op::Add) == 2);
  CHECK(op_arity(Op::Param) == 0);
  CHECK(op_kind(Op::Param) == OpKind::Source);
  CHECK(op_arity(Op::FusedPointwise) == -1);
  CHECK(op_kind(Op::FusedPointwise) == OpKind::Fused);
  CHECK_FALSE(is_pointwise(Op::FusedPointwise));
  CHECK(op_kind(Op::Return) == OpKind::Terminator);
  CHECK(op_name(Op::FusedPointwise) == "fused.pointwise");
  CHECK(op_kind_name(OpKind::Gemm) == "gemm");
  CHECK(op_kind_name(OpKind::Pointwise) == "pointwise");
}

TEST_CASE("dtype names and sizes", "[ir]") {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) CHECK(parse_dtype(dtype_name(t)) == t);
  CHECK(dtype_name(DType::BF16) == "bf16");
  CHECK(dtype_size(DType::F32) == 4);
  CHECK(dtype_size(DType::F16) == 2);
  CHECK(dtype_size(DType::BF16) == 2);
  CHECK_FALSE(parse_dtype("f64").has_value());
}

TEST_CASE("shape numel and rows bind the batch dim", "[ir]") {
  Shape s{{kBatchDim, 8, 768}};
  CHECK(s.has_batch());
  CHECK(s.rank() == 3);
  CHECK(s.last() == 768);
  CHECK(s.numel(4) == 4 * 8 * 768);
  CHECK(s.rows(4) == 32);
  Shape w{{3072, 768}};
  CHECK_FALSE(w.has_batch());
  CHECK(w.numel(99) == 3072 * 768);
  CHECK(w.rows(99) == 3072);
  CHECK(Shape{{5}}.rows(1) == 1);
}

TEST_CASE("types print with the batch symbol", "[ir]") {
  TensorType t{DType::BF16, Shape{{kBatchDim, 3072}}};
  CHECK(to_string(t) == "bf16[M, 3072]");
  CHECK(to_string(t, "B") == "bf16[B, 3072]");
  CHECK(to_string(Shape{{2, 3}}) == "[2, 3]");
}
