#include "compiler/logs.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "ir/error.h"
#include "ir/printer.h"

namespace mlpc {
namespace {

// Prefixes every line of `text` with "[mlpc:TOPIC] ", so grep can pick one topic out of stderr.
std::string prefixed(const char* topic, const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out += fmt::format("[mlpc:{}] {}\n", topic, line);
  return out;
}

}  // namespace

LogTopics parse_log_topics(const std::string& spec) {
  LogTopics t;
  std::string clean;
  for (char ch : spec)
    if (ch != ' ' && ch != '\t') clean += ch;
  std::istringstream in(clean);
  for (std::string topic; std::getline(in, topic, ',');) {
    if (topic.empty()) continue;
    if (topic == "passes") t.passes = true;
    else if (topic == "fusion") t.fusion = true;
    else if (topic == "output_code") t.output_code = true;
    else if (topic == "builds") t.builds = true;
    else if (topic == "all") t.passes = t.fusion = t.output_code = t.builds = true;
    else
      throw Error(fmt::format("MLPC_LOGS: unknown topic '{}' (known: passes, fusion, "
                              "output_code, builds, all)", topic));
  }
  return t;
}

LogTopics log_topics_from_env() {
  const char* v = std::getenv("MLPC_LOGS");
  return v ? parse_log_topics(v) : LogTopics{};
}

std::string compile_log(const CompiledGraph& c, const LogTopics& topics) {
  std::string out;
  if (topics.passes) {
    out += prefixed("passes", "input IR:\n" + c.pipeline.input_ir);
    for (const passes::PassRecord& r : c.pipeline.passes) {
      if (r.changed)
        out += prefixed("passes", fmt::format("after {} ({:.3f} ms):\n{}", r.pass, r.ms, r.ir));
      else
        out += prefixed("passes", fmt::format("after {} ({:.3f} ms): unchanged", r.pass, r.ms));
    }
  }
  if (topics.fusion) {
    const std::string report = c.pipeline.fusion.to_string();
    out += prefixed("fusion", report.empty() ? "no fusion candidates" : report);
  }
  if (topics.output_code) {
    const codegen::Plan& p = c.plan;
    for (const codegen::Step& s : p.steps) {
      if (const auto* g = std::get_if<codegen::GemmStep>(&s)) {
        out += prefixed("output_code",
                        fmt::format("{}: cuBLASLt matmul {} = {} . {}^T, epilogue {}", g->name,
                                    ir::to_string(p.buffers[g->y].type),
                                    ir::to_string(p.buffers[g->x].type),
                                    ir::to_string(p.buffers[g->w].type),
                                    g->epilogue.plain() ? std::string("none")
                                                        : ir::epilogue_formula(g->epilogue)));
      } else {
        const auto& k = std::get<codegen::KernelStep>(s);
        out += prefixed("output_code", fmt::format("{}: generated CUDA C++\n{}", k.name, k.source));
      }
    }
  }
  return out;
}

void log_compile(const CompiledGraph& c, const LogTopics& topics) {
  if (!topics.any()) return;
  const std::string text = compile_log(c, topics);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace mlpc
