// The properties the fuzz targets check, header-only so the normal test suite replays kept crash
// inputs (tests/test_fuzz_regressions.cpp) through exactly the code the fuzzers run.
//
// Contract of every check: bad input may be rejected only by an mlpc::Error with a one-line
// message; anything else (another exception, an abort, a sanitizer report) is a bug. A broken
// property throws std::logic_error, which libFuzzer reports as a crash and Catch as a failure.
#pragma once

#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/candidates.h"
#include "codegen/memory_plan.h"
#include "codegen/plan_builder.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "passes/fuse_mlp.h"
#include "passes/select_kernels.h"

namespace mlpc::fuzz {

inline constexpr std::string_view kFuzzFile = "fuzz.mlp";

[[noreturn]] inline void broken(const std::string& what) {
  throw std::logic_error("fuzz check failed: " + what);
}

// A clean rejection: one line that names the input file.
inline void check_rejection(const Error& e, std::string_view file) {
  std::string_view msg = e.what();
  if (msg.find('\n') != std::string_view::npos) broken(std::string("error message spans lines: ") + e.what());
  if (msg.substr(0, file.size()) != file)
    broken("error message does not start with the file name: " + std::string(msg));
}

// Parses TEXT; nullopt-like false when it is (cleanly) rejected.
inline bool parse_or_reject(std::string_view text, ir::Graph& out) {
  try {
    out = ir::parse(text, kFuzzFile);
    return true;
  } catch (const Error& e) {
    check_rejection(e, kFuzzFile);
    return false;
  }
}

// print(parse(print(g))) == print(g): the text form loses nothing, and what the printer writes
// the parser reads back (it verifies too).
inline void check_round_trip(const ir::Graph& g, std::string_view what) {
  std::string printed = ir::print(g);
  ir::Graph again;
  try {
    again = ir::parse(printed, "printed.mlp");
  } catch (const Error& e) {
    broken(std::string(what) + ": printed IR does not parse back: " + e.what());
  }
  if (ir::print(again) != printed) broken(std::string(what) + ": printed IR changes when re-parsed");
}

// fuzz_parser: text -> parse (which verifies) -> verify -> print -> parse -> print.
inline void check_parser(std::string_view text) {
  ir::Graph g;
  if (!parse_or_reject(text, g)) return;
  ir::verify(g);  // parse() promises a verified graph: an Error here escapes as a bug
  check_round_trip(g, "parsed graph");
}

// fuzz_pipeline: a graph that parses goes through the pass pipeline at every fusion setting (the
// pipeline verifies after every pass that changes the graph) and through codegen and the memory
// planner. Past the parser nothing may throw, not even an mlpc::Error. NVRTC is left out: too
// slow for fuzzing (the CPU tests compile every sample's kernels).
inline void check_pipeline(std::string_view text) {
  ir::Graph g;
  if (!parse_or_reject(text, g)) return;
  // Eager, fused, and fused with every optional pass forced one way or the other.
  auto merge_all = [](const passes::GemmMergeCandidate&) {
    return passes::GemmMergeDecision{true, "fuzz: merge every candidate"};
  };
  auto fold_none = [](const passes::EpilogueCandidate&) {
    return passes::EpilogueDecision{false, "fuzz: fold nothing"};
  };
  const passes::PipelineOptions settings[] = {
      {.fusion = false, .epilogues = false},
      {.fusion = true, .epilogues = false},
      {.fusion = true, .epilogues = true},
      {.fusion = true, .epilogues = true, .merge_gemms = merge_all},
      {.fusion = true, .epilogues = true, .merge_gemms = merge_all, .epilogue_decider = fold_none},
  };
  for (const passes::PipelineOptions& o : settings) {
    passes::PipelineResult r;
    std::vector<codegen::Plan> plans;  // GEMMs through cuBLASLt, and as generated kernels
    try {
      r = passes::run_pipeline(g, o);
      ir::verify(r.graph);
      plans.push_back(codegen::build_plan(r.graph));
      // Kernel selection forced each way it can go without a GPU (the asked-for modes): every
      // GEMM as the CUDA-core kernel, as the mma kernel, every gated GEMM as each kernel, every
      // f32 GEMM as 3xTF32, every f32 GEMM's x and w transposed, every chain the fused-MLP
      // kernels take as one fused.mlp region; each selected graph prints and parses back.
      const passes::SelectOptions forced[] = {
          {.small_gemms = passes::SmallGemms::On},
          {.small_gemms = passes::SmallGemms::Mma},
          {.gated_gemms = passes::GatedGemms::On},
          {.gated_gemms = passes::GatedGemms::Mma},
          {.fp32_gemms = passes::Fp32Gemms::Tf32x3},
          {.transposed_x = passes::TransposedX::On},
          {.fused_mlps = passes::FusedMlps::On},
      };
      const std::vector<codegen::CandidateFragments> cands = codegen::enumerate_candidates(r.graph);
      std::vector<passes::KernelCandidate> candidates;
      for (const codegen::CandidateFragments& c : cands) candidates.push_back(c.candidate);
      for (const passes::SelectOptions& so : forced) {
        ir::Graph selected = r.graph;
        std::vector<passes::KernelRecord> records;
        passes::select_kernels(selected, candidates, so, &records);
        passes::fuse_mlp(selected);
        ir::verify(selected);
        check_round_trip(selected, "graph after kernel selection");
        plans.push_back(codegen::build_plan(selected, {.records = &records}));
      }
    } catch (const Error& e) {
      broken(std::string("a verified graph failed in the passes or codegen: ") + e.what());
    }
    check_round_trip(r.graph, "graph after the passes");
    // Every kernel is a distinct C identifier: NVRTC compiles it and the executor finds it by
    // name (a GEMM value called "fc1.mm" once became a kernel symbol as it was).
    for (const codegen::Plan& plan : plans) {
      std::set<std::string> symbols;
      for (const codegen::Step& s : plan.steps) {
        const auto* k = std::get_if<codegen::KernelStep>(&s);
        if (!k) continue;
        if (!ir::is_c_identifier(k->name))
          broken("kernel symbol is not a C identifier: " + k->name);
        if (!symbols.insert(k->name).second) broken("two kernels share the symbol " + k->name);
      }
    }
    // Every buffer index is valid and every intermediate is written before it is read (gated
    // GEMMs and 3xTF32 rewrites remove steps and renumber buffers).
    for (const codegen::Plan& plan : plans) {
      const int nb = static_cast<int>(plan.buffers.size());
      std::vector<bool> written(plan.buffers.size(), false);
      auto read = [&](int b) {
        if (b < -1 || b >= nb) broken("a step names a buffer that does not exist");
        if (b >= 0 && plan.buffers[b].role == codegen::BufferRole::Intermediate && !written[b])
          broken("an intermediate is read before any step writes it: " + plan.buffers[b].name);
      };
      auto write = [&](int b) {
        if (b < 0 || b >= nb) broken("a step writes a buffer that does not exist");
        written[b] = true;
      };
      for (const codegen::Step& s : plan.steps) {
        const std::vector<int> bufs = codegen::step_buffers(s);
        for (size_t i = 0; i + 1 < bufs.size(); ++i) read(bufs[i]);
        // A 3xTF32 K-chunk reads its columns of x and w; a later one adds to y, written before.
        if (const auto* gm = std::get_if<codegen::GemmStep>(&s)) {
          if (gm->accumulate) read(gm->y);
          if (gm->k_begin < 0 || gm->k_begin + gm->stored_k() > gm->stored_row() ||
              (gm->x >= 0 && gm->x < nb &&
               plan.buffers[gm->x].type.shape.last() != gm->stored_row()))
            broken("a GEMM's K-chunk lies outside its operands' rows: " + gm->name);
        }
        write(bufs.back());
      }
      // Buffers stored transposed are written and read so (the executor's own check).
      if (const auto e = codegen::layout_error(plan)) broken("operand layouts: " + *e);
      // A derived param (3xTF32 parts) names a param [n, k] and is [n, 3k] itself.
      for (const codegen::Buffer& b : plan.buffers) {
        if (b.split_of < 0) continue;
        if (b.split_of >= nb || plan.buffers[b.split_of].role != codegen::BufferRole::Param)
          broken("a split param names a buffer that is not a param: " + b.name);
        std::vector<int64_t> dims = plan.buffers[b.split_of].type.shape.dims;
        if (!dims.empty()) dims.back() *= 3;
        if (b.role != codegen::BufferRole::Param || b.type.shape.dims != dims)
          broken("a split param is not its source's [n, 3k]: " + b.name);
        if (b.split_chunk <= 0 || dims.empty() || (dims.back() / 3) % b.split_chunk != 0)
          broken("a split param's K-chunk does not divide its K: " + b.name);
      }
    }
    // The smallest batch and the largest one the CLI takes (--batch <= 2^24).
    for (const codegen::Plan& plan : plans)
      for (int64_t batch : {int64_t{1}, int64_t{1} << 24}) {
        codegen::MemoryPlan m = codegen::plan_memory(plan, batch);
        if (m.arena_bytes < 0 || m.arena_bytes > m.unshared_bytes)
          broken("memory plan arena is negative or larger than no sharing at all");
      }
  }
}

}  // namespace mlpc::fuzz
