// The C++ tracing API: operations on Tensor handles record IR nodes, so an MLP is written as
// ordinary C++ (`gelu_tanh(gate(x)) * up(x)`) and comes out as a verified ir::Graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/builder.h"

namespace mlpc {

inline constexpr int64_t kBatch = ir::kBatchDim;  // the symbolic batch dim in a shape

class Tracer;

class Tensor {
 public:
  Tensor(Tracer* tracer, ir::NodeId id) : tracer_(tracer), id_(id) {}
  ir::NodeId id() const { return id_; }
  Tracer& tracer() const { return *tracer_; }
  const ir::TensorType& type() const;
  // Names the traced value in the printed IR (%name).
  Tensor named(std::string name) const;

 private:
  Tracer* tracer_;
  ir::NodeId id_;
};

class Tracer {
 public:
  explicit Tracer(std::string graph_name) : b_(std::move(graph_name)) {}
  Tensor input(std::string name, ir::DType dtype, std::vector<int64_t> dims);
  Tensor param(std::string name, ir::DType dtype, std::vector<int64_t> dims);
  ir::Graph finish(const std::vector<Tensor>& outputs);
  ir::Builder& builder() { return b_; }

 private:
  ir::Builder b_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator*(const Tensor& a, double factor);
Tensor operator*(double factor, const Tensor& a);

Tensor matmul(const Tensor& x, const Tensor& w);  // x . w^T, w stored [out, in]
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);       // exact (erf)
Tensor gelu_tanh(const Tensor& x);  // tanh approximation
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor cast(const Tensor& x, ir::DType to);
Tensor rsqrt(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor operator+(const Tensor& a, double constant);  // add_scalar

// Row reductions over the last axis, keeping it: [.., N] -> [.., 1].
Tensor reduce_sum(const Tensor& x);
Tensor reduce_mean(const Tensor& x);
Tensor reduce_max(const Tensor& x);
// Composites over the last axis, recorded as one op each (passes/expand_composites lowers
// them): weight * x / sqrt(mean(x^2) + eps); (x - mean) / sqrt(var + eps) * weight + bias;
// exp(x - max) / sum(exp(x - max)).
Tensor rmsnorm(const Tensor& x, const Tensor& weight, double eps);
Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
Tensor softmax(const Tensor& x);
// torch.nn.RMSNorm / LayerNorm(N) with params NAME.weight (and NAME.bias); the result is NAME.
Tensor rmsnorm(const Tensor& x, double eps, const std::string& name);
Tensor layernorm(const Tensor& x, double eps, const std::string& name);

// torch.nn.Linear: creates params NAME.weight [out, in] and (with bias) NAME.bias [out]; the
// result is named NAME (the bias add's result when there is a bias, else the matmul's).
Tensor linear(const Tensor& x, int64_t out_features, bool bias, const std::string& name);

}  // namespace mlpc
