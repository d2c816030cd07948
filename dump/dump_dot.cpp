#include "dump/dump_dot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <sstream>

#include "dump/fusion_md.h"
#include "dump/report.h"

namespace mlpc {
namespace {

namespace fs = std::filesystem;

// A double-quoted DOT string; "\n" in `s` becomes a centered line break.
std::string dot_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

std::string type_text(const ir::Graph& g, const ir::TensorType& t) {
  return ir::to_string(t, g.batch_symbol);
}

// The style of a compute node by the kind of kernel that runs it.
std::string compute_style(std::string_view kind) {
  if (kind == "gemm" || kind == "gated_gemm")
    return "shape=box, style=\"filled,bold\", fillcolor=\"#9ecae1\", color=\"#08519c\"";
  if (kind == "reduction")
    return "shape=hexagon, style=filled, fillcolor=\"#a1d99b\", color=\"#006d2c\"";
  return "shape=ellipse, style=filled, fillcolor=\"#fdd0a2\", color=\"#a63603\"";
}

std::string op_kind_of(ir::Op op) {
  std::string kind(ir::op_kind_name(ir::op_kind(op)));
  for (char& ch : kind) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return kind;
}

}  // namespace

std::string graph_dot(const CompiledGraph& c, int64_t batch) {
  const ir::Graph& g = c.pipeline.graph;
  std::map<std::string, StepFacts> step_of;  // IR value -> the step that computes it
  for (StepFacts& f : plan_facts(c.plan, batch))
    for (const std::string& node : f.nodes) step_of[node] = f;
  std::map<std::string, GroupTraffic> traffic;
  for (GroupTraffic& t : group_traffic(c, batch)) traffic[t.kernel] = t;

  std::ostringstream out;
  out << "digraph " << dot_string(g.name) << " {\n"
      << "  rankdir=TB;\n  compound=true;\n"
      << "  node [fontname=\"Helvetica\", fontsize=11];\n"
      << "  edge [color=\"#555555\"];\n"
      << "  label=" << dot_string(fmt::format(
             "@{} at batch {}: {} launches. Blue boxes: cuBLASLt GEMMs; orange: pointwise ops; "
             "green: reductions; each cluster is one generated kernel.", g.name, batch, c.plan.launches()))
      << ";\n  labelloc=b;\n  fontname=\"Helvetica\";\n";

  // The DOT id that holds each outer value: its own node, or the body node a region returns.
  std::vector<std::string> value_id(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const std::string id = fmt::format("n{}", i);
    switch (n.op) {
      case ir::Op::Input:
        out << "  " << id << " [label=" << dot_string(fmt::format("input %{}\n{}", n.name,
                                                              type_text(g, n.type)))
            << ", shape=invhouse, style=filled, fillcolor=\"#d9d9d9\"];\n";
        value_id[i] = id;
        break;
      case ir::Op::Param:
        out << "  " << id << " [label=" << dot_string(fmt::format("%{}\n{}", n.name,
                                                              type_text(g, n.type)))
            << ", shape=note, style=filled, fillcolor=\"#f0f0f0\", fontsize=9];\n";
        value_id[i] = id;
        break;
      case ir::Op::Return:
        out << "  " << id << " [label=\"return\", shape=house, style=filled, "
            << "fillcolor=\"#d9d9d9\"];\n";
        for (ir::NodeId o : n.operands) out << "  " << value_id[o.index] << " -> " << id << ";\n";
        break;
      case ir::Op::FusedPointwise:
      case ir::Op::FusedReduction:
      case ir::Op::FusedMlp: {
        const ir::Graph& body = *n.body;
        const GroupTraffic& t = traffic[n.symbol];
        out << "  subgraph " << dot_string("cluster_" + n.symbol) << " {\n"
            << "    label=" << dot_string(fmt::format("{}\n{:.2f} MB moved, {:.2f} MB saved by fusion",
                                                  n.symbol, t.fused_bytes / 1e6, t.saved() / 1e6))
            << ";\n    labelloc=t;\n    style=\"rounded,filled\";\n    fillcolor=\"#fff5eb\";\n"
            << "    color=\"#e6550d\";\n    fontname=\"Helvetica-Bold\";\n";
        std::vector<std::string> body_id(body.size());
        std::vector<ir::NodeId> body_inputs = body.inputs();
        for (size_t a = 0; a < body_inputs.size() && a < n.operands.size(); ++a)
          body_id[body_inputs[a].index] = value_id[n.operands[a].index];
        std::string edges;
        for (size_t j = 0; j < body.size(); ++j) {
          const ir::Node& b = body.nodes[j];
          if (b.op == ir::Op::Input) continue;
          if (b.op == ir::Op::Return) {
            value_id[i] = body_id[b.operands.at(0).index];
            continue;
          }
          body_id[j] = fmt::format("n{}_{}", i, j);
          out << "    " << body_id[j] << " [label="
              << dot_string(fmt::format("{} %{}\n{}", ir::op_name(b.op), b.name, type_text(g, b.type)))
              << ", " << compute_style(op_kind_of(b.op)) << "];\n";
          for (ir::NodeId o : b.operands)
            edges += fmt::format("  {} -> {};\n", body_id[o.index], body_id[j]);
        }
        out << "  }\n" << edges;
        break;
      }
      default: {
        auto it = step_of.find(n.name);
        std::string label = fmt::format("{} %{}\n{}", ir::op_name(n.op), n.name,
                                        type_text(g, n.type));
        std::string kind = op_kind_of(n.op);
        if (it != step_of.end()) {
          label = fmt::format("{}\n{}", it->second.name, label);
          if (it->second.flops > 0) label += fmt::format("\n{:.2f} GFLOP", it->second.flops / 1e9);
          kind = it->second.kind;
        }
        out << "  " << id << " [label=" << dot_string(label) << ", " << compute_style(kind) << "];\n";
        for (ir::NodeId o : n.operands) out << "  " << value_id[o.index] << " -> " << id << ";\n";
        value_id[i] = id;
      }
    }
  }
  out << "}\n";
  return out.str();
}

std::string find_dot() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / "dot";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

bool render_svg(const fs::path& dot_file, const fs::path& svg_file) {
  const std::string dot = find_dot();
  if (dot.empty()) return false;
  auto q = [](const std::string& s) {
    std::string r = "'";
    for (char ch : s) r += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return r + "'";
  };
  const std::string cmd = fmt::format("{} -Tsvg {} -o {} >/dev/null 2>&1 </dev/null", q(dot),
                                      q(dot_file.string()), q(svg_file.string()));
  std::error_code ec;
  if (std::system(cmd.c_str()) == 0 && fs::is_regular_file(svg_file, ec)) return true;
  fs::remove(svg_file, ec);
  return false;
}

}  // namespace mlpc
