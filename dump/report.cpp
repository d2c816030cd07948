#include "dump/report.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>

#include "dump/dump_dot.h"
#include "dump/dump_html.h"
#include "dump/fusion_md.h"
#include "ir/error.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "runtime/jit/nvrtc_ptx.h"

namespace mlpc {
namespace {

namespace fs = std::filesystem;
using codegen::GemmStep;
using codegen::KernelStep;

std::string_view role_name(codegen::BufferRole r) {
  switch (r) {
    case codegen::BufferRole::Input: return "input";
    case codegen::BufferRole::Param: return "param";
    case codegen::BufferRole::Intermediate: return "intermediate";
    case codegen::BufferRole::Output: return "output";
  }
  return "?";
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(fmt::format("{}: error: cannot write file", path.string()));
}

}  // namespace

StepFacts step_facts(const codegen::Plan& p, const codegen::Step& s, int64_t batch) {
  StepFacts f;
  if (auto* g = std::get_if<GemmStep>(&s)) {
    f = {g->name, "gemm", codegen::gemm_ops(g->epilogue), g->ir_nodes};
    if (g->tf32x3) f.ops.push_back("tf32x3");  // three TF32 products (codegen/tf32x3.h)
    if (g->accumulate) f.ops.push_back("accumulate");  // a K-chunk adding to y
    if (g->x_transposed) f.layout.push_back("x_transposed");  // codegen/transposed_x_plan.h
    if (g->w_transposed) f.layout.push_back("w_transposed");
    f.generated = false;
    // What it reads of x and w (a K-chunk: its columns), y written (and read when adding to it).
    const double rows = static_cast<double>(p.buffers[g->x].type.shape.rows(batch));
    const auto size = static_cast<double>(ir::dtype_size(g->dtype));
    f.bytes = static_cast<int64_t>((rows + g->n) * g->stored_k() * size) +
              p.buffers[g->y].bytes(batch) * (g->accumulate ? 2 : 1);
    for (int extra : {g->bias, g->residual})
      if (extra >= 0) f.bytes += p.buffers[extra].bytes(batch);
    f.flops = 2.0 * rows * g->n * g->k;
    f.dtype = p.buffers[g->y].type.dtype;
  } else {
    const auto& k = std::get<KernelStep>(s);
    f = {k.name, std::string(k.kind_name()), k.ops, k.ir_nodes};
    if (k.store() == codegen::Store::Transposed)
      f.layout.push_back("store_transposed");  // for a GEMM's x
    for (int i : k.inputs) f.bytes += p.buffers[i].bytes(batch);
    f.bytes += p.buffers[k.output].bytes(batch);
    if (const int64_t macs = k.macs_per_row(); macs > 0)
      f.flops = 2.0 * static_cast<double>(p.buffers[k.output].type.shape.rows(batch)) *
                static_cast<double>(macs);
    f.dtype = p.buffers[k.output].type.dtype;
  }
  return f;
}

std::vector<StepFacts> plan_facts(const codegen::Plan& p, int64_t batch) {
  std::vector<StepFacts> out;
  for (const codegen::Step& s : p.steps) out.push_back(step_facts(p, s, batch));
  return out;
}

nlohmann::json plan_json(const CompiledGraph& c, int64_t batch) {
  const codegen::Plan& p = c.plan;
  nlohmann::json kernels = nlohmann::json::array();
  for (const codegen::Step& s : p.steps) {
    StepFacts f = step_facts(p, s, batch);
    nlohmann::json k = {{"name", f.name}, {"kind", f.kind}, {"ops", f.ops},
                        {"ir_nodes", f.nodes}, {"bytes", f.bytes}};
    if (f.flops > 0) k["flops"] = f.flops;
    if (!f.layout.empty()) k["layout"] = f.layout;
    if (auto* ks = std::get_if<KernelStep>(&s)) k["vector_width"] = ks->vec;
    kernels.push_back(std::move(k));
  }
  nlohmann::json buffers = nlohmann::json::array();
  for (const codegen::Buffer& b : p.buffers)
    buffers.push_back({{"name", b.name}, {"type", ir::to_string(b.type)},
                       {"role", role_name(b.role)}, {"bytes", b.bytes(batch)},
                       {"layout", b.transposed ? "transposed" : "row-major"}});
  nlohmann::json passes = nlohmann::json::array();
  for (const passes::PassRecord& r : c.pipeline.passes)
    passes.push_back({{"pass", r.pass}, {"changed", r.changed}, {"ms", r.ms}});
  nlohmann::json fusion = nlohmann::json::array();
  for (const passes::FusionDecision& d : c.pipeline.fusion.decisions)
    fusion.push_back({{"group", d.group}, {"producer", d.producer}, {"consumer", d.consumer},
                      {"fused", d.verdict != passes::Verdict::Rejected},
                      {"verdict", d.verdict == passes::Verdict::Fused        ? "fused"
                                  : d.verdict == passes::Verdict::Recomputed ? "recomputed"
                                                                             : "rejected"},
                      {"reason", d.reason}});
  nlohmann::json choices = nlohmann::json::array();
  for (const codegen::StepChoice& ch : p.choices)
    // taken: the generated kernel (small, gated GEMM) or 3xTF32 was chosen over the plain GEMM.
    choices.push_back({{"step", ch.step}, {"taken", ch.taken}, {"why", ch.why}});
  return {{"graph", p.graph_name},    {"batch", batch},     {"arch", c.arch},
          {"launches", p.launches()}, {"kernels", kernels}, {"buffers", buffers},
          {"passes", passes},         {"fusion", fusion},   {"gemm_choices", choices},
          {"nvrtc_ms", c.nvrtc_ms}, {"passes_ms", c.passes_ms},
          {"passes_timing_ms", c.passes_timing_ms}, {"plan_ms", c.plan_ms},
          {"kernels_ms", c.compile_ms}};
}

std::string plan_text(const CompiledGraph& c, int64_t batch) {
  const codegen::Plan& p = c.plan;
  const bool batched = std::any_of(p.buffers.begin(), p.buffers.end(), [](const auto& b) {
    return b.type.shape.has_batch();
  });
  std::string out = fmt::format("plan for @{} {}: {} launch{}\n", p.graph_name,
                                batched ? fmt::format("at batch {}", batch) : "(static shapes)",
                                p.launches(), p.launches() == 1 ? "" : "es");
  int i = 0;
  for (const codegen::Step& s : p.steps) {
    StepFacts f = step_facts(p, s, batch);
    std::vector<std::string> what = f.ops;  // the ops, then how operands are stored
    what.insert(what.end(), f.layout.begin(), f.layout.end());
    out += fmt::format("  {:>2}. {:<9} {:<32} {:<36} {:>9.2f} MB", i++, f.kind, f.name,
                       fmt::format("{}", fmt::join(what, "+")), f.bytes / 1e6);
    if (f.flops > 0) out += fmt::format("  {:.2f} GFLOP", f.flops / 1e9);
    out += "\n";
  }
  return out;
}

void write_dump(const std::string& dir, const CompiledGraph& c, int64_t batch,
                const DumpOptions& options) {
  fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root / "kernels", ec);
  if (ec) throw Error(fmt::format("{}: error: cannot create dump folder: {}", dir, ec.message()));
  DumpIndex index;
  write_file(root / "00-input.mlp", c.pipeline.input_ir);
  index.passes.push_back({"input", true, 0.0, "00-input.mlp"});
  int n = 1;
  for (const passes::PassRecord& r : c.pipeline.passes) {
    std::string file = r.changed ? fmt::format("{:02}-{}.mlp", n++, r.pass) : "";
    if (r.changed) write_file(root / file, r.ir);
    index.passes.push_back({r.pass, r.changed, r.ms, file});
  }
  for (const codegen::Step& s : c.plan.steps) {
    auto* k = std::get_if<KernelStep>(&s);
    if (!k) continue;
    write_file(root / "kernels" / (k->name + ".cu"), k->source);
    if (options.emit_ptx)
      write_file(root / "kernels" / (k->name + ".ptx"),
                 runtime::compile_to_ptx(k->source, k->name,
                                         k->arch_specific() ? runtime::arch_specific(c.arch)
                                                            : c.arch));
  }
  index.has_ptx = options.emit_ptx;
  write_file(root / "fusion.txt", c.pipeline.fusion.to_string());
  write_file(root / "fusion.md", fusion_markdown(c, batch));
  write_file(root / "plan.txt", plan_text(c, batch));
  write_file(root / "plan.json", plan_json(c, batch).dump(2) + "\n");
  write_file(root / "graph.dot", graph_dot(c, batch));
  fs::remove(root / "graph.svg", ec);  // never leave a picture of an older compile
  index.has_svg = options.render_svg && render_svg(root / "graph.dot", root / "graph.svg");
  write_file(root / "index.html", index_html(c, batch, index));
}

}  // namespace mlpc
