#include "compiler/samples.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

#include "compiler/tracing.h"
#include "ir/error.h"

namespace mlpc {
namespace {

using ir::DType;

// The article's nn.Linear(32, 64): one GEMM and a bias.
ir::Graph linear_sample() {
  Tracer t("linear");
  Tensor x = t.input("x", DType::BF16, {kBatch, 32});
  return t.finish({linear(x, 64, true, "y")});
}

// The article's GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), no biases.
ir::Graph geglu_sample() {
  Tracer t("geglu");
  Tensor x = t.input("x", DType::BF16, {kBatch, 768});
  Tensor gate = linear(x, 3072, false, "gate");
  Tensor up = linear(x, 3072, false, "up");
  Tensor h = (gelu_tanh(gate).named("act") * up).named("h");
  return t.finish({linear(h, 768, false, "down")});
}

// The GeGLU MLP at Llama-3-8B's FFN size: d 4096, hidden 14336.
ir::Graph llama_geglu_sample() {
  Tracer t("llama_geglu");
  Tensor x = t.input("x", DType::BF16, {kBatch, 4096});
  Tensor h = (gelu_tanh(linear(x, 14336, false, "gate")).named("act") *
              linear(x, 14336, false, "up")).named("h");
  return t.finish({linear(h, 4096, false, "down")});
}

// Three Linear layers with bias and an activation between them, in fp32.
template <Tensor (*Act)(const Tensor&)>
ir::Graph mlp3_of(const char* name, int64_t d, int64_t hidden) {
  Tracer t(name);
  Tensor x = t.input("x", DType::F32, {kBatch, d});
  Tensor h1 = Act(linear(x, hidden, true, "fc1")).named("h1");
  Tensor h2 = Act(linear(h1, hidden, true, "fc2")).named("h2");
  return t.finish({linear(h2, d, true, "fc3")});
}

ir::Graph mlp3_sample() { return mlp3_of<gelu>("mlp3", 1024, 4096); }
ir::Graph mlp3_small_sample() { return mlp3_of<relu>("mlp3_small", 256, 256); }

// The transformer FFN block: x + down(act(gate(n)) * up(n)), n = norm(x), at x bf16[M, 768],
// hidden 3072.
template <Tensor (*Norm)(const Tensor&, double, const std::string&),
          Tensor (*Act)(const Tensor&)>
ir::Graph ffn_of(const char* name) {
  Tracer t(name);
  Tensor x = t.input("x", DType::BF16, {kBatch, 768});
  Tensor n = Norm(x, 1e-5, "norm");
  Tensor gate = linear(n, 3072, false, "gate");
  Tensor up = linear(n, 3072, false, "up");
  Tensor h = (Act(gate).named("act") * up).named("h");
  return t.finish({(x + linear(h, 768, false, "down")).named("y")});
}

// anchors.md's FFN row: RMSNorm and a GELU (tanh) gate.
ir::Graph ffn_sample() { return ffn_of<rmsnorm, gelu_tanh>("ffn"); }
// The same block with LayerNorm and a SiLU gate (SwiGLU).
ir::Graph ffn_swiglu_sample() { return ffn_of<layernorm, silu>("ffn_swiglu"); }

// A classifier head: two Linear layers with GELU (tanh) between, softmax over 1000 classes.
ir::Graph classifier_sample() {
  Tracer t("classifier");
  Tensor x = t.input("x", DType::BF16, {kBatch, 1024});
  Tensor h = gelu_tanh(linear(x, 4096, true, "fc1")).named("h");
  return t.finish({softmax(linear(h, 1000, true, "fc2")).named("probs")});
}

// tiny-cuda-nn's fully fused MLP as PyTorch writes it: nn.Sequential of nn.Linear(bias=False)
// and nn.ReLU, f16; params named as its state_dict ("0.weight", "2.weight", ...).
ir::Graph tcnn_of(const char* name, int64_t in, int64_t width, int hidden, int64_t out) {
  Tracer t(name);
  Tensor h = t.input("x", DType::F16, {kBatch, in});
  int at = 0;
  for (int i = 0; i < hidden; ++i, at += 2)
    h = relu(linear(h, width, false, std::to_string(at))).named(std::to_string(at + 1));
  return t.finish({linear(h, out, false, std::to_string(at))});
}

ir::Graph tcnn_w64_sample() { return tcnn_of("tcnn_w64", 64, 64, 5, 16); }
ir::Graph tcnn_w128_sample() { return tcnn_of("tcnn_w128", 64, 128, 5, 16); }
ir::Graph tcnn_w32_sample() { return tcnn_of("tcnn_w32", 32, 32, 2, 16); }

// A narrow MLP with biases and GELU (tanh), f16: nn.Sequential of nn.Linear and
// nn.GELU(approximate="tanh").
ir::Graph narrow_gelu_sample() {
  Tracer t("narrow_gelu");
  Tensor h = t.input("x", DType::F16, {kBatch, 64});
  for (int at = 0; at < 6; at += 2)
    h = gelu_tanh(linear(h, 64, true, std::to_string(at))).named(std::to_string(at + 1));
  return t.finish({linear(h, 16, true, "6")});
}

struct Sample {
  SampleInfo info;
  ir::Graph (*make)();
};

const std::vector<Sample>& registry() {
  static const std::vector<Sample> r = {
      {{"linear", "the article's nn.Linear: x bf16[M, 32] -> 64, with bias", 1024},
       linear_sample},
      {{"geglu", "the article's GeGLU MLP: x bf16[M, 768], hidden 3072, gelu_tanh", 8192},
       geglu_sample},
      {{"mlp3", "3 Linear with bias, GELU (erf) between: f32 1024->4096->4096->1024", 8192},
       mlp3_sample},
      {{"mlp3_small", "small mlp3 with ReLU: f32 256->256->256->256", 64}, mlp3_small_sample},
      {{"llama_geglu", "GeGLU FFN at Llama-3-8B size: x bf16[M, 4096], hidden 14336", 4096},
       llama_geglu_sample},
      {{"ffn", "transformer FFN block: x + GeGLU(rmsnorm(x)), x bf16[M, 768], hidden 3072", 8192},
       ffn_sample},
      {{"ffn_swiglu", "FFN block with LayerNorm and SwiGLU: x bf16[M, 768], hidden 3072", 8192},
       ffn_swiglu_sample},
      {{"classifier", "2-layer MLP 1024->4096->1000 (bias, gelu_tanh), softmax: x bf16[M, 1024]",
        4096},
       classifier_sample},
      {{"tcnn_w64", "tiny-cuda-nn's MLP: f16 64 -> 5 x 64 (relu) -> 16, no bias", 262144},
       tcnn_w64_sample},
      {{"tcnn_w128", "tiny-cuda-nn's MLP: f16 64 -> 5 x 128 (relu) -> 16, no bias", 262144},
       tcnn_w128_sample},
      {{"tcnn_w32", "tiny-cuda-nn's MLP: f16 32 -> 2 x 32 (relu) -> 16, no bias", 262144},
       tcnn_w32_sample},
      {{"narrow_gelu", "narrow MLP: f16 64 -> 3 x 64 (bias, gelu_tanh) -> 16 (bias)", 262144},
       narrow_gelu_sample},
  };
  return r;
}

const Sample& find(const std::string& name) {
  std::vector<std::string> names;
  for (const Sample& s : registry()) {
    if (s.info.name == name) return s;
    names.push_back(s.info.name);
  }
  throw Error(fmt::format("unknown sample '{}' (known: {})", name, fmt::join(names, ", ")));
}

}  // namespace

const std::vector<SampleInfo>& samples() {
  static const std::vector<SampleInfo> infos = [] {
    std::vector<SampleInfo> v;
    for (const Sample& s : registry()) v.push_back(s.info);
    return v;
  }();
  return infos;
}

const SampleInfo& sample_info(const std::string& name) { return find(name).info; }
ir::Graph make_sample(const std::string& name) { return find(name).make(); }

}  // namespace mlpc
