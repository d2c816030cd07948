#include "passes/select_kernels.h"

#include <fmt/format.h>

#include <map>
#include <optional>

#include "ir/error.h"

namespace mlpc::passes {
namespace {

// What a record calls option `impl`.
std::string option_label(ir::Impl impl) {
  switch (impl) {
    case ir::Impl::Simt: return "CUDA-core kernel";
    case ir::Impl::Mma: return "tensor-core mma kernel";
    case ir::Impl::GatedWgmma: return "the Hopper kernel";
    case ir::Impl::GatedMma: return "the mma kernel";
    default: return std::string(ir::impl_name(impl));
  }
}

// The fastest timed option among `timed` (indices into c.options), or nullopt.
std::optional<size_t> fastest(const KernelCandidate& c, const std::vector<size_t>& timed) {
  std::optional<size_t> best;
  for (size_t i : timed)
    if (c.options[i].us > 0 && (!best || c.options[i].us < c.options[*best].us)) best = i;
  return best;
}

// The other timed options, for the record: "; CUDA-core kernel 4.10 us".
std::string others_timed(const KernelCandidate& c, const std::vector<size_t>& timed, size_t chosen,
                         int decimals) {
  std::string s;
  for (size_t i : timed)
    if (i != chosen)
      s += fmt::format("; {} {:.{}f} us", option_label(c.options[i].impl), c.options[i].us,
                       decimals);
  return s;
}

std::optional<size_t> option_with(const KernelCandidate& c, ir::Impl impl) {
  for (size_t i = 0; i < c.options.size(); ++i)
    if (c.options[i].impl == impl) return i;
  return std::nullopt;
}

// The measured pick among `timed` against the baseline, by `decide`, with the others' times.
// `the`: what the chosen option's label starts with ("the CUDA-core kernel").
template <typename Decide>
Choice measured(const KernelCandidate& c, const std::vector<size_t>& timed, int decimals,
                bool label_alone, const char* the, Decide decide) {
  const std::optional<size_t> best = fastest(c, timed);
  if (!best) return decide(0.0, c.baseline_us);
  Choice ch = decide(c.options[*best].us, c.baseline_us);
  ch.option = *best;
  if (timed.size() > 1 || label_alone)
    ch.why += fmt::format(" ({}{}{})", the, option_label(c.options[*best].impl),
                          others_timed(c, timed, *best, decimals));
  return ch;
}

Choice small_gemm(const KernelCandidate& c, const SelectOptions& o) {
  if (c.options.empty()) return {false, c.detail};
  if (o.small_gemms == SmallGemms::Mma) {
    if (auto i = option_with(c, ir::Impl::Mma))
      return {true, "tensor-core mma kernel (--small-gemms mma)", *i};
    return {false, "cuBLASLt: the mma kernel cannot compute it"};
  }
  if (o.small_gemms == SmallGemms::On) {  // every GEMM the CUDA-core kernel computes, unrecorded
    if (auto i = option_with(c, ir::Impl::Simt)) return {true, "", *i};
    return {false, ""};
  }
  const std::vector<size_t> timed = options_to_time(c, o);
  if (timed.empty())
    return {false, fmt::format("cuBLASLt: {} x {} x {} (M x N x K) is past the 2^26 "
                               "multiply-adds a CUDA-core kernel can win and the {} rows of the "
                               "tensor-core mma kernel (not measured)",
                               o.rows, c.n, c.k, kMmaGemmMaxRows)};
  if (!o.measured) return {false, "cuBLASLt: no GPU to measure on"};
  if (!c.timing_error.empty()) return {false, "cuBLASLt: could not time: " + c.timing_error};
  const std::optional<size_t> best = fastest(c, timed);
  const bool mma = best && c.options[*best].impl == ir::Impl::Mma;
  return measured(c, timed, 2, mma, "the ", [&](double us, double base) {
    return decide_small_gemm(us, base, o.rows);
  });
}

Choice gated(const KernelCandidate& c, const SelectOptions& o) {
  const bool hopper = gated_gemms_run_on(o.arch);
  if (o.gated_gemms == GatedGemms::Mma) {
    if (auto i = option_with(c, ir::Impl::GatedMma))
      return {true, "gated mma kernel (--gated-gemms mma)", *i};
    return {false, "kept apart: the mma kernel cannot compute it"};
  }
  const std::string needs_sm90 = fmt::format(
      "kept apart: the gated GEMM kernel needs sm_90 (TMA, WGMMA), the target is {}", o.arch);
  if (o.gated_gemms == GatedGemms::On) {
    if (!hopper || c.options.empty() || c.options.front().impl != ir::Impl::GatedWgmma)
      return {false, needs_sm90};
    return {true, "gated GEMM kernel (--gated-gemms on)", 0};
  }
  const std::vector<size_t> timed = options_to_time(c, o);
  if (timed.empty())
    return {false, needs_sm90 + (mma_gemms_run_on(o.arch)
                                     ? fmt::format(", and the mma one at most {} rows",
                                                   kMmaGemmMaxRows)
                                     : "")};
  if (!o.measured) return {false, "kept apart: no GPU to measure on"};
  if (!c.timing_error.empty()) return {false, "kept apart: could not time: " + c.timing_error};
  const std::optional<size_t> best = fastest(c, timed);
  const bool mma = best && c.options[*best].impl == ir::Impl::GatedMma;
  return measured(c, timed, 1, mma, "", [&](double us, double base) {
    return decide_gated_gemm(us, base, o.rows);
  });
}

// A fused MLP's record says which layers it takes and where it stops (c.detail), then why.
Choice fused_mlp(const KernelCandidate& c, const SelectOptions& o) {
  auto with_detail = [&](Choice ch) {
    ch.why = c.detail.empty() ? ch.why : ch.why + "; " + c.detail;
    return ch;
  };
  if (c.options.empty()) return {false, "layer by layer: " + c.detail};
  if (!fused_mlps_run_on(o.arch, c.dtype))
    return with_detail({false, fmt::format("layer by layer: the {} kernel does not run on {}",
                                           ir::dtype_name(c.dtype), o.arch)});
  if (o.fused_mlps == FusedMlps::On) return with_detail({true, "one kernel (--fused-mlp on)", 0});
  if (!o.measured) return with_detail({false, "layer by layer: no GPU to measure on"});
  if (!c.timing_error.empty())
    return with_detail({false, "layer by layer: could not time: " + c.timing_error});
  return with_detail(decide_fused_mlp(c.options.front().us, c.baseline_us, o.rows));
}

Choice tf32x3(const KernelCandidate& c, const SelectOptions& o) {
  if (o.fp32_gemms == Fp32Gemms::Tf32x3) return {true, "3xTF32 (--fp32-gemms tf32x3), " + c.detail};
  if (c.below_ieee)
    return {false, fmt::format("IEEE fp32: K = {} cannot be cut into chunks that keep 3xTF32 as "
                               "accurate (not measured)", c.k)};
  if (!o.measured) return {false, "IEEE fp32: no GPU to measure on"};
  if (!c.timing_error.empty()) return {false, "IEEE fp32: could not time: " + c.timing_error};
  Choice ch = decide_tf32x3(c.options.front().us, c.baseline_us, o.rows);
  if (ch.take) ch.why += ", " + c.detail;
  return ch;
}

Choice transposed(const KernelCandidate& c, const SelectOptions& o) {
  const bool weight = c.kind == ChoiceKind::TransposedW;
  if (o.transposed_x == TransposedX::On)
    return {true, weight ? "w transposed (--transposed-x on)" : "x transposed (--transposed-x on)"};
  if (!o.measured) return {false, "x row-major: no GPU to measure on"};
  if (!c.timing_error.empty())
    return {false, fmt::format("{}: could not time: {}", weight ? "w [n, k]" : "x row-major",
                               c.timing_error)};
  return decide_transposed_x(c.options.front().us, c.baseline_us, o.rows, weight);
}

// Whether `kind`'s choices run at all under `o` (a mode that is not off).
bool active(ChoiceKind kind, const SelectOptions& o) {
  switch (kind) {
    case ChoiceKind::FusedMlp: return o.fused_mlps != FusedMlps::Off;
    case ChoiceKind::Gated: return o.gated_gemms != GatedGemms::Off;
    case ChoiceKind::SmallGemm: return o.small_gemms != SmallGemms::Off;
    case ChoiceKind::Tf32x3: return o.fp32_gemms != Fp32Gemms::Ieee;
    case ChoiceKind::TransposedX:
    case ChoiceKind::TransposedW: return o.transposed_x != TransposedX::Off;
  }
  return false;
}

// Whether the candidate is still open: every node it sets runs as the choices before left it
// for this kind (a GEMM taken by a gated kernel or a generated one is not an f32 layout choice).
bool open(const KernelCandidate& c, const std::map<std::string, ir::Impl>& impl) {
  for (const std::string& v : c.nodes) {
    const ir::Impl now = impl.count(v) ? impl.at(v) : ir::Impl::Auto;
    const bool ok = c.kind == ChoiceKind::TransposedW ? now == ir::Impl::CublasltXt
                                                      : now == ir::Impl::Auto;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

bool select_kernels(ir::Graph& g, const std::vector<KernelCandidate>& candidates,
                    const SelectOptions& o, std::vector<KernelRecord>* records) {
  std::map<std::string, ir::Node*> by_name;
  for (ir::Node& n : g.nodes) by_name[n.name] = &n;
  std::map<std::string, ir::Impl> impl;
  for (const ir::Node& n : g.nodes)
    if (n.impl != ir::Impl::Auto) impl[n.name] = n.impl;
  for (ChoiceKind kind : {ChoiceKind::FusedMlp, ChoiceKind::Gated, ChoiceKind::SmallGemm, ChoiceKind::Tf32x3,
                          ChoiceKind::TransposedX, ChoiceKind::TransposedW}) {
    if (!active(kind, o)) continue;
    for (const KernelCandidate& c : candidates) {
      if (c.kind != kind || !open(c, impl)) continue;
      Choice ch;
      switch (kind) {
        case ChoiceKind::FusedMlp: ch = fused_mlp(c, o); break;
        case ChoiceKind::Gated: ch = gated(c, o); break;
        case ChoiceKind::SmallGemm: ch = small_gemm(c, o); break;
        case ChoiceKind::Tf32x3: ch = tf32x3(c, o); break;
        case ChoiceKind::TransposedX:
        case ChoiceKind::TransposedW: ch = transposed(c, o); break;
      }
      const bool recorded = !(kind == ChoiceKind::SmallGemm && o.small_gemms == SmallGemms::On);
      if (records && recorded) records->push_back({kind, c.step, ch.take, ch.why});
      if (!ch.take) continue;
      const ir::Impl chosen = c.options.at(ch.option).impl;
      for (const std::string& v : c.nodes) impl[v] = chosen;
    }
  }
  // Every matmul says how it runs, the ones left as they were included.
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::MatMul && !impl.count(n.name)) impl[n.name] = ir::Impl::Cublaslt;
  bool changed = false;
  for (const auto& [name, chosen] : impl) {
    auto it = by_name.find(name);
    if (it == by_name.end())
      throw Error(fmt::format("select-kernels: candidate names %{}, which the graph does not have",
                              name));
    changed |= it->second->impl != chosen;
    it->second->impl = chosen;
  }
  return changed;
}

}  // namespace mlpc::passes
