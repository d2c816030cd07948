#include "compiler/tracing.h"

namespace mlpc {
namespace {

Tensor record(ir::Op op, std::vector<Tensor> operands, double scalar = 0.0) {
  Tracer& t = operands[0].tracer();
  std::vector<ir::NodeId> ids;
  for (const Tensor& o : operands) ids.push_back(o.id());
  return Tensor(&t, t.builder().op(op, std::move(ids), {}, scalar));
}

}  // namespace

const ir::TensorType& Tensor::type() const { return tracer_->builder().type(id_); }

Tensor Tensor::named(std::string name) const {
  tracer_->builder().rename(id_, std::move(name));
  return *this;
}

Tensor Tracer::input(std::string name, ir::DType dtype, std::vector<int64_t> dims) {
  return Tensor(this, b_.input(std::move(name), {dtype, {std::move(dims)}}));
}

Tensor Tracer::param(std::string name, ir::DType dtype, std::vector<int64_t> dims) {
  return Tensor(this, b_.param(std::move(name), {dtype, {std::move(dims)}}));
}

ir::Graph Tracer::finish(const std::vector<Tensor>& outputs) {
  std::vector<ir::NodeId> ids;
  for (const Tensor& o : outputs) ids.push_back(o.id());
  b_.ret(std::move(ids));
  return b_.finish();
}

Tensor operator+(const Tensor& a, const Tensor& b) { return record(ir::Op::Add, {a, b}); }
Tensor operator-(const Tensor& a, const Tensor& b) { return record(ir::Op::Sub, {a, b}); }
Tensor operator*(const Tensor& a, const Tensor& b) { return record(ir::Op::Mul, {a, b}); }
Tensor operator/(const Tensor& a, const Tensor& b) { return record(ir::Op::Div, {a, b}); }
Tensor operator-(const Tensor& a) { return record(ir::Op::Neg, {a}); }
Tensor operator*(const Tensor& a, double f) { return record(ir::Op::Scale, {a}, f); }
Tensor operator*(double f, const Tensor& a) { return a * f; }

Tensor matmul(const Tensor& x, const Tensor& w) { return record(ir::Op::MatMul, {x, w}); }
Tensor relu(const Tensor& x) { return record(ir::Op::Relu, {x}); }
Tensor gelu(const Tensor& x) { return record(ir::Op::Gelu, {x}); }
Tensor gelu_tanh(const Tensor& x) { return record(ir::Op::GeluTanh, {x}); }
Tensor silu(const Tensor& x) { return record(ir::Op::Silu, {x}); }
Tensor sigmoid(const Tensor& x) { return record(ir::Op::Sigmoid, {x}); }
Tensor tanh(const Tensor& x) { return record(ir::Op::Tanh, {x}); }
Tensor exp(const Tensor& x) { return record(ir::Op::Exp, {x}); }

Tensor cast(const Tensor& x, ir::DType to) {
  return Tensor(&x.tracer(), x.tracer().builder().cast(x.id(), to));
}

Tensor rsqrt(const Tensor& x) { return record(ir::Op::Rsqrt, {x}); }
Tensor sqrt(const Tensor& x) { return record(ir::Op::Sqrt, {x}); }
Tensor square(const Tensor& x) { return record(ir::Op::Square, {x}); }
Tensor operator+(const Tensor& a, double c) { return record(ir::Op::AddScalar, {a}, c); }
Tensor reduce_sum(const Tensor& x) { return record(ir::Op::ReduceSum, {x}); }
Tensor reduce_mean(const Tensor& x) { return record(ir::Op::ReduceMean, {x}); }
Tensor reduce_max(const Tensor& x) { return record(ir::Op::ReduceMax, {x}); }
Tensor rmsnorm(const Tensor& x, const Tensor& w, double eps) {
  return record(ir::Op::RmsNorm, {x, w}, eps);
}
Tensor layernorm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  return record(ir::Op::LayerNorm, {x, w, b}, eps);
}
Tensor softmax(const Tensor& x) { return record(ir::Op::Softmax, {x}); }

Tensor rmsnorm(const Tensor& x, double eps, const std::string& name) {
  Tensor w = x.tracer().param(name + ".weight", x.type().dtype, {x.type().shape.last()});
  return rmsnorm(x, w, eps).named(name);
}

Tensor layernorm(const Tensor& x, double eps, const std::string& name) {
  Tracer& t = x.tracer();
  Tensor w = t.param(name + ".weight", x.type().dtype, {x.type().shape.last()});
  Tensor b = t.param(name + ".bias", x.type().dtype, {x.type().shape.last()});
  return layernorm(x, w, b, eps).named(name);
}

Tensor linear(const Tensor& x, int64_t out_features, bool bias, const std::string& name) {
  Tracer& t = x.tracer();
  ir::DType dt = x.type().dtype;
  Tensor w = t.param(name + ".weight", dt, {out_features, x.type().shape.last()});
  Tensor y = matmul(x, w);
  if (!bias) return y.named(name);
  y = y.named(name + ".mm");
  return (y + t.param(name + ".bias", dt, {out_features})).named(name);
}

}  // namespace mlpc
