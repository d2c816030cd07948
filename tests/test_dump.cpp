// The --dump-dir folder of every sample at every optimization level: the files it must hold, one
// name per kernel across the IR, the .cu files, the plan, the fusion report and the graph, a
// graph.dot that Graphviz renders, and an index.html whose every link resolves.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "compiler/compile.h"
#include "dump/dump_dot.h"
#include "dump/dump_html.h"
#include "dump/fusion_md.h"
#include "dump/report.h"
#include "compiler/samples.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using mlpc::test::ScratchDir;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

mlpc::CompiledGraph compile_at(const std::string& sample, int level) {
  mlpc::CompileOptions o;
  o.fusion = level >= 1;
  o.epilogues = level >= 2;
  o.arch = "sm_90";
  o.build_kernels = false;  // the dump needs sources, not CUBINs
  return mlpc::compile(mlpc::make_sample(sample), o);
}

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).generic_string());
  return out;
}

// Every href="..." and src="..." value in the page.
std::vector<std::string> links_in(const std::string& html) {
  std::vector<std::string> out;
  std::regex attr(R"((?:href|src)=\"([^\"]*)\")");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), attr); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1]);
  return out;
}

// Links that do not resolve: a relative file missing from the dump, or an #anchor with no id.
std::vector<std::string> broken_links(const fs::path& dir) {
  const std::string html = slurp(dir / "index.html");
  std::vector<std::string> broken;
  for (const std::string& link : links_in(html)) {
    if (!link.empty() && link[0] == '#') {
      if (html.find(fmt::format("id=\"{}\"", link.substr(1))) == std::string::npos)
        broken.push_back(link);
    } else if (link.empty() || link.find("://") != std::string::npos || link[0] == '/' ||
               !fs::is_regular_file(dir / link)) {
      broken.push_back(link);
    }
  }
  return broken;
}

}  // namespace

TEST_CASE("dump: every sample at -O0, -O1 and -O2 writes a complete folder", "[dump]") {
  const bool have_dot = !mlpc::find_dot().empty();
  if (!have_dot) WARN("Graphviz dot not on PATH: graph.svg is not checked (scripts/setup.sh installs it)");
  for (const mlpc::SampleInfo& s : mlpc::samples()) {
    for (int level : {0, 1, 2}) {
      INFO("sample " << s.name << " -O" << level);
      ScratchDir tmp;
      const fs::path dir = tmp.path / "dump";
      mlpc::CompiledGraph c = compile_at(s.name, level);
      mlpc::write_dump(dir.string(), c, s.default_batch);
      const std::set<std::string> files = files_in(dir);

      std::set<std::string> want = {"00-input.mlp", "fusion.txt", "fusion.md", "plan.txt",
                                    "plan.json",    "graph.dot",  "index.html"};
      if (have_dot) want.insert("graph.svg");
      // The IR after each pass that changed it, numbered in pipeline order.
      int n = 1;
      std::string last_ir_file = "00-input.mlp";
      for (const mlpc::passes::PassRecord& r : c.pipeline.passes)
        if (r.changed) want.insert(last_ir_file = fmt::format("{:02}-{}.mlp", n++, r.pass));
      // One .cu per generated kernel, named after it; GEMMs are cuBLASLt calls.
      const std::string final_ir = slurp(dir / last_ir_file);
      const std::string plan = slurp(dir / "plan.txt");
      const std::string dot = slurp(dir / "graph.dot");
      const std::string html = slurp(dir / "index.html");
      for (const mlpc::StepFacts& f : mlpc::plan_facts(c.plan, s.default_batch)) {
        INFO("kernel " << f.name);
        CHECK(plan.find(" " + f.name + " ") != std::string::npos);
        CHECK(dot.find(f.name) != std::string::npos);
        CHECK(html.find("id=\"" + f.name + "\"") != std::string::npos);
        if (f.kind == "gemm") {
          CHECK(f.name == "gemm_" + f.nodes.at(0));
          CHECK(final_ir.find("%" + f.nodes.at(0) + " = matmul") != std::string::npos);
        } else {
          want.insert("kernels/" + f.name + ".cu");
          CHECK(final_ir.find("@" + f.name + "(") != std::string::npos);
          CHECK(dot.find("cluster_" + f.name) != std::string::npos);
        }
      }
      CHECK(files == want);
      // The last dumped IR is the compiled graph, and it parses back.
      CHECK_NOTHROW(mlpc::ir::parse_file((dir / last_ir_file).string()));
      // Every fusion decision is in the report, with its reason.
      const std::string md = slurp(dir / "fusion.md");
      for (const mlpc::passes::FusionDecision& d : c.pipeline.fusion.decisions) {
        CHECK(md.find(fmt::format("| `{}` | `%{}` | `%{}` |", d.group, d.producer, d.consumer)) !=
              std::string::npos);
        CHECK(md.find(d.reason) != std::string::npos);
      }
      if (have_dot) CHECK(slurp(dir / "graph.svg").find("<svg") != std::string::npos);
      CHECK(broken_links(dir).empty());
    }
  }
}

TEST_CASE("dump: fusion.md counts the HBM bytes a fused group saves", "[dump]") {
  // geglu at M=8192: gelu_tanh and mul run one kernel each would read gate, write act, read act
  // and up, write h; fused, act never touches memory: 2 x 8192 x 3072 bf16 values saved.
  mlpc::CompiledGraph c = compile_at("geglu", 1);
  std::vector<mlpc::GroupTraffic> groups = mlpc::group_traffic(c, 8192);
  REQUIRE(groups.size() == 1);
  const int64_t tensor = int64_t{8192} * 3072 * 2;
  CHECK(groups[0].kernel == "mlpc_fused_gelu_tanh_mul_0");
  CHECK(groups[0].nodes == std::vector<std::string>{"act", "h"});
  CHECK(groups[0].fused_bytes == 3 * tensor);
  CHECK(groups[0].unfused_bytes == 5 * tensor);
  CHECK(groups[0].saved() == 2 * tensor);
  const std::string md = mlpc::fusion_markdown(c, 8192);
  CHECK(md.find("| `mlpc_fused_gelu_tanh_mul_0` | %act, %h | 150.99 | 251.66 | 100.66 |") !=
        std::string::npos);
  CHECK(md.find("rejected | producer is a matmul") != std::string::npos);
  // Eager: each op its own group, nothing saved.
  for (const mlpc::GroupTraffic& t : mlpc::group_traffic(compile_at("geglu", 0), 8192))
    CHECK(t.saved() == 0);
}

TEST_CASE("dump: graph.dot styles GEMMs and pointwise ops apart and clusters each kernel",
          "[dump]") {
  const std::string dot = mlpc::graph_dot(compile_at("geglu", 1), 8192);
  CHECK(dot.rfind("digraph \"geglu\" {", 0) == 0);
  CHECK(dot.find("subgraph \"cluster_mlpc_fused_gelu_tanh_mul_0\"") != std::string::npos);
  // Three GEMMs as boxes, two pointwise ops as ellipses (inside the one cluster).
  auto count = [&](const std::string& needle) {
    size_t n = 0;
    for (size_t at = dot.find(needle); at != std::string::npos; at = dot.find(needle, at + 1)) ++n;
    return n;
  };
  CHECK(count("shape=box") == 3);
  CHECK(count("shape=ellipse") == 2);
  CHECK(count("subgraph") == 1);
  CHECK(count("{") == count("}"));
  // Edges: the GEMM results feed the body ops; the fused result feeds the down GEMM.
  CHECK(dot.find("n2 -> n5_2;") != std::string::npos);  // %gate -> gelu_tanh
  CHECK(dot.find("n5_3 -> n7;") != std::string::npos);  // mul (%h) -> %down
}

TEST_CASE("dump: graph.dot renders with Graphviz", "[dump]") {
  if (mlpc::find_dot().empty()) {
    WARN("Graphviz dot not on PATH: skipped");
    return;
  }
  ScratchDir tmp;
  for (const mlpc::SampleInfo& s : mlpc::samples()) {
    INFO(s.name);
    std::ofstream(tmp.path / "g.dot") << mlpc::graph_dot(compile_at(s.name, 1), s.default_batch);
    REQUIRE(mlpc::render_svg(tmp.path / "g.dot", tmp.path / "g.svg"));
    CHECK(fs::file_size(tmp.path / "g.svg") > 0);
  }
  // A file dot cannot parse gives no picture, and no stale file.
  std::ofstream(tmp.path / "bad.dot") << "digraph { a -> ";
  CHECK_FALSE(mlpc::render_svg(tmp.path / "bad.dot", tmp.path / "bad.svg"));
  CHECK_FALSE(fs::exists(tmp.path / "bad.svg"));
}

TEST_CASE("dump: every link in index.html resolves, with and without the picture and PTX",
          "[dump]") {
  ScratchDir tmp;
  mlpc::CompiledGraph c = compile_at("geglu", 1);
  for (bool svg : {false, true}) {
    for (bool ptx : {false, true}) {
      INFO("svg " << svg << " ptx " << ptx);
      const fs::path dir = tmp.path / fmt::format("d{}{}", int(svg), int(ptx));
      mlpc::write_dump(dir.string(), c, 8192, {.emit_ptx = ptx, .render_svg = svg});
      const std::string html = slurp(dir / "index.html");
      const std::vector<std::string> links = links_in(html);
      // The passes in order, each kernel, the report, the plan and the graph are all linked.
      for (const char* want : {"00-input.mlp", "01-fuse-pointwise.mlp", "fusion.md", "plan.txt",
                               "graph.dot", "kernels/mlpc_fused_gelu_tanh_mul_0.cu",
                               "#mlpc_fused_gelu_tanh_mul_0"})
        CHECK(std::find(links.begin(), links.end(), want) != links.end());
      CHECK(html.find("01-fuse-pointwise.mlp") < html.find("kernels/"));
      const bool linked_ptx = std::find(links.begin(), links.end(),
                                        "kernels/mlpc_fused_gelu_tanh_mul_0.ptx") != links.end();
      CHECK(linked_ptx == ptx);
      const bool linked_svg = std::find(links.begin(), links.end(), "graph.svg") != links.end();
      CHECK(linked_svg == (svg && !mlpc::find_dot().empty()));
      // The kernel row shows the IR region it computes.
      CHECK(html.find("%h = fused.pointwise @mlpc_fused_gelu_tanh_mul_0(%gate, %up)") !=
            std::string::npos);
      CHECK(broken_links(dir).empty());
    }
  }
  // The checker itself fails on a dangling link.
  const fs::path dir = tmp.path / "d11";
  fs::remove(dir / "plan.txt");
  CHECK(broken_links(dir) == std::vector<std::string>{"plan.txt"});
}

TEST_CASE("dump: --emit-ptx writes PTX whose entry is the kernel's name", "[dump]") {
  ScratchDir tmp;
  mlpc::CompiledGraph c = compile_at("geglu", 0);
  mlpc::write_dump(tmp.path.string(), c, 16, {.emit_ptx = true, .render_svg = false});
  for (const char* k : {"mlpc_gelu_tanh_0", "mlpc_mul_1"}) {
    const std::string ptx = slurp(tmp.path / "kernels" / (std::string(k) + ".ptx"));
    CHECK(ptx.find(".target sm_90") != std::string::npos);
    CHECK(ptx.find(std::string(".entry ") + k) != std::string::npos);
  }
}

TEST_CASE("dump: a folder that cannot be created is one error naming it", "[dump][error]") {
  ScratchDir tmp;
  std::ofstream(tmp.path / "file") << "x";
  const std::string dir = (tmp.path / "file" / "dump").string();
  try {
    mlpc::write_dump(dir, compile_at("linear", 1), 16);
    FAIL("no error");
  } catch (const mlpc::Error& e) {
    std::string msg = e.what();
    CHECK(msg.rfind(dir + ": error: cannot create dump folder", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
  }
}

TEST_CASE("dump: html_escape escapes what HTML reads as markup", "[dump]") {
  CHECK(mlpc::html_escape("a<b & \"c\">") == "a&lt;b &amp; &quot;c&quot;&gt;");
}

TEST_CASE("dump: generated GEMM kernels are linked as kernels, with their PTX",
          "[dump][gated_gemm]") {
  ScratchDir tmp;
  mlpc::CompileOptions o{.fusion = true, .epilogues = true, .arch = "sm_90",
                         .build_kernels = false, .measure_epilogues = false};
  o.gated_gemms = mlpc::GatedGemms::On;
  mlpc::CompiledGraph c = mlpc::compile(mlpc::make_sample("geglu"), o);
  mlpc::write_dump(tmp.path.string(), c, 8192, {.emit_ptx = true, .render_svg = false});
  std::vector<std::string> links = links_in(slurp(tmp.path / "index.html"));
  for (const char* want : {"kernels/mlpc_fused_gelu_tanh_mul_0.cu",
                           "kernels/mlpc_fused_gelu_tanh_mul_0.ptx"})
    CHECK(std::find(links.begin(), links.end(), want) != links.end());
  CHECK(std::find(links.begin(), links.end(), "kernels/gemm_down.cu") == links.end());  // cuBLASLt
  CHECK(broken_links(tmp.path).empty());
  // A small-GEMM kernel is a kernel too, though its kind is "gemm".
  mlpc::CompileOptions small = o;
  small.gated_gemms = mlpc::GatedGemms::Off;
  small.small_gemms = mlpc::SmallGemms::On;
  const fs::path dir = tmp.path / "small";
  mlpc::write_dump(dir.string(), mlpc::compile(mlpc::make_sample("mlp3_small"), small), 64,
                   {.render_svg = false});
  links = links_in(slurp(dir / "index.html"));
  CHECK(std::find(links.begin(), links.end(), "kernels/gemm_h1.cu") != links.end());
  // WGMMA exists only in the arch-specific target.
  CHECK(slurp(tmp.path / "kernels" / "mlpc_fused_gelu_tanh_mul_0.ptx").find(".target sm_90a") !=
        std::string::npos);
}
