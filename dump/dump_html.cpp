#include "dump/dump_html.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <sstream>

#include "dump/fusion_md.h"
#include "dump/report.h"
#include "ir/printer.h"

namespace mlpc {
namespace {

constexpr const char* kStyle = R"(
body { font-family: Helvetica, Arial, sans-serif; margin: 24px; max-width: 1400px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; font-size: 13px; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 6px 8px; margin: 0; font-size: 12px; overflow-x: auto; }
.gemm { color: #08519c; font-weight: bold; } .pointwise { color: #a63603; font-weight: bold; }
.reduction { color: #006d2c; font-weight: bold; }
.unchanged { color: #999; } nav a { margin-right: 14px; }
img.graph { max-width: 100%; border: 1px solid #ddd; }
)";

// The lines of `ir` that define %value: one line, or a fused region through its closing brace.
std::string defining_lines(const std::string& ir, const std::string& value) {
  std::istringstream in(ir);
  std::string out;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (!inside && line.rfind("  %" + value + " = ", 0) == 0) {
      out += line + "\n";
      if (!line.empty() && line.back() == '{') inside = true;
      else return out;
      continue;
    }
    if (inside) {
      out += line + "\n";
      if (line == "  }") return out;
    }
  }
  return out;
}

std::string link(const std::string& href, const std::string& text) {
  return fmt::format("<a href=\"{}\">{}</a>", html_escape(href), html_escape(text));
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string index_html(const CompiledGraph& c, int64_t batch, const DumpIndex& index) {
  const std::vector<StepFacts> steps = plan_facts(c.plan, batch);
  const std::string final_ir = ir::print(c.pipeline.graph);
  const std::string title =
      fmt::format("mlpc: @{} at batch {} for {}", c.plan.graph_name, batch, c.arch);
  int64_t bytes = 0;
  double flops = 0;
  for (const StepFacts& f : steps) bytes += f.bytes, flops += f.flops;

  std::string h = fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                              "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n",
                              html_escape(title), kStyle);
  h += fmt::format("<h1>{}</h1>\n", html_escape(title));
  h += fmt::format("<p>{} launches per forward, {:.2f} MB of HBM traffic, {:.2f} GFLOP.</p>\n",
                   c.plan.launches(), bytes / 1e6, flops / 1e9);
  h += "<nav><a href=\"#passes\">passes</a><a href=\"#graph\">graph</a>"
       "<a href=\"#kernels\">kernels</a><a href=\"#fusion\">fusion</a><a href=\"#plan\">plan</a>"
       "</nav>\n";

  h += "<h2 id=\"passes\">Passes, in pipeline order</h2>\n<table>\n"
       "<tr><th>#</th><th>pass</th><th>ms</th><th>IR after it</th></tr>\n";
  for (size_t i = 0; i < index.passes.size(); ++i) {
    const DumpIndex::Pass& p = index.passes[i];
    h += fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                     i, html_escape(p.pass), p.pass == "input" ? "" : fmt::format("{:.3f}", p.ms),
                     p.file.empty() ? "<span class=\"unchanged\">unchanged</span>"
                                    : link(p.file, p.file));
  }
  h += "</table>\n";

  h += "<h2 id=\"graph\">Dataflow graph</h2>\n";
  if (index.has_svg)
    h += "<p>" + link("graph.svg", "graph.svg") + " (from " + link("graph.dot", "graph.dot") +
         "): each cluster is one generated kernel.</p>\n"
         "<a href=\"graph.svg\"><img class=\"graph\" src=\"graph.svg\" alt=\"dataflow graph\"></a>\n";
  else
    h += "<p>" + link("graph.dot", "graph.dot") +
         " (Graphviz was not found, so no picture: <code>dot -Tsvg graph.dot -o graph.svg</code>)"
         ".</p>\n";

  h += "<h2 id=\"kernels\">Kernels, in launch order</h2>\n<table>\n<tr><th>#</th><th>kernel</th>"
       "<th>kind</th><th>MB</th><th>GFLOP</th><th>source</th><th>IR nodes it computes</th></tr>\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepFacts& f = steps[i];
    std::string files = "cuBLASLt call";
    if (f.generated) {  // small-GEMM and gated GEMM kernels are generated too
      files = link("kernels/" + f.name + ".cu", f.name + ".cu");
      if (index.has_ptx) files += "<br>" + link("kernels/" + f.name + ".ptx", f.name + ".ptx");
    }
    std::string ir;
    // A kernel's group is printed under the value it returns: the last node it computes.
    if (!f.nodes.empty()) ir = defining_lines(final_ir, f.nodes.back());
    h += fmt::format(
        "<tr id=\"{}\"><td class=\"num\">{}</td><td><code>{}</code></td><td class=\"{}\">{}</td>"
        "<td class=\"num\">{:.2f}</td><td class=\"num\">{}</td><td>{}</td><td><pre>{}</pre></td>"
        "</tr>\n",
        html_escape(f.name), i, html_escape(f.name), html_escape(f.kind), html_escape(f.kind),
        f.bytes / 1e6, f.flops > 0 ? fmt::format("{:.2f}", f.flops / 1e9) : "", files,
        html_escape(ir));
  }
  h += "</table>\n";

  h += "<h2 id=\"fusion\">Fusion</h2>\n<p>Full report: " + link("fusion.md", "fusion.md") +
       " (text: " + link("fusion.txt", "fusion.txt") + ").</p>\n";
  const std::vector<GroupTraffic> groups = group_traffic(c, batch);
  if (!groups.empty()) {
    h += "<table>\n<tr><th>kernel</th><th>IR nodes</th><th>MB fused</th><th>MB one kernel per op"
         "</th><th>MB saved</th></tr>\n";
    for (const GroupTraffic& t : groups)
      h += fmt::format("<tr><td><a href=\"#{0}\"><code>{0}</code></a></td><td>%{1}</td>"
                       "<td class=\"num\">{2:.2f}</td><td class=\"num\">{3:.2f}</td>"
                       "<td class=\"num\">{4:.2f}</td></tr>\n",
                       html_escape(t.kernel), html_escape(fmt::format("{}", fmt::join(t.nodes, ", %"))),
                       t.fused_bytes / 1e6, t.unfused_bytes / 1e6, t.saved() / 1e6);
    h += "</table>\n";
  }
  const auto& decisions = c.pipeline.fusion.decisions;
  if (!decisions.empty()) {
    h += "<table>\n<tr><th>group</th><th>producer &rarr; consumer</th><th>verdict</th>"
         "<th>reason</th></tr>\n";
    for (const passes::FusionDecision& d : decisions)
      h += fmt::format("<tr><td><code>{}</code></td><td>%{} &rarr; %{}</td><td>{}</td><td>{}</td></tr>\n",
                       html_escape(d.group), html_escape(d.producer), html_escape(d.consumer),
                       d.verdict == passes::Verdict::Fused        ? "fused"
                       : d.verdict == passes::Verdict::Recomputed ? "recomputed"
                                                                  : "rejected",
                       html_escape(d.reason));
    h += "</table>\n";
  }

  h += "<h2 id=\"plan\">Plan</h2>\n<p>" + link("plan.txt", "plan.txt") + ", " +
       link("plan.json", "plan.json") + "</p>\n<pre>" + html_escape(plan_text(c, batch)) +
       "</pre>\n";
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace mlpc
