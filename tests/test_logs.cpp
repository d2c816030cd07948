// MLPC_LOGS=passes,fusion,output_code,builds: what compile() prints to stderr, from the C++ API
// (here) and the CLI (a child process), and the one-line error for an unknown topic.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <tuple>

#include "compiler/logs.h"
#include "compiler/samples.h"
#include "ir/error.h"
#include "runtime/jit/build_log.h"
#include "runtime/jit/cached_compiler.h"
#include "host/scoped_env.h"
#include "pass_test_util.h"
#include "run_together.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using mlpc::runtime::ScopedEnv;
using mlpc::test::count;
using mlpc::test::ScratchDir;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// What `f` writes to file descriptor 2 while it runs.
template <class F>
std::string capture_stderr(F&& f) {
  ScratchDir tmp;
  const fs::path file = tmp.path / "stderr";
  std::fflush(stderr);
  const int saved = ::dup(2);
  REQUIRE(saved >= 0);
  FILE* sink = std::fopen(file.c_str(), "w");
  REQUIRE(sink);
  ::dup2(::fileno(sink), 2);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::fclose(sink);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::fclose(sink);
  return slurp(file);
}

mlpc::CompileOptions no_nvrtc() {
  mlpc::CompileOptions o;
  o.arch = "sm_90";
  o.build_kernels = false;
  return o;
}

}  // namespace

TEST_CASE("logs: MLPC_LOGS topics parse, with 'all' and spaces", "[logs]") {
  mlpc::LogTopics t = mlpc::parse_log_topics("passes, output_code");
  CHECK(t.passes);
  CHECK_FALSE(t.fusion);
  CHECK(t.output_code);
  CHECK_FALSE(t.builds);
  t = mlpc::parse_log_topics("all");
  CHECK((t.passes && t.fusion && t.output_code && t.builds));
  CHECK(mlpc::parse_log_topics("builds").builds);
  CHECK_FALSE(mlpc::parse_log_topics("").any());
  CHECK_FALSE(mlpc::parse_log_topics(",,").any());
}

TEST_CASE("logs: an unknown topic is one error line naming the known ones", "[logs][error]") {
  CHECK_THROWS_WITH(mlpc::parse_log_topics("passes,kernels"),
                    "MLPC_LOGS: unknown topic 'kernels' (known: passes, fusion, output_code, "
                    "builds, all)");
}

TEST_CASE("logs: each topic prints its part of the compile, prefixed", "[logs]") {
  mlpc::CompiledGraph c = mlpc::compile(mlpc::make_sample("geglu"), no_nvrtc());
  const std::string passes = mlpc::compile_log(c, {.passes = true});
  CHECK(passes.find("[mlpc:passes] input IR:") != std::string::npos);
  CHECK(passes.find("[mlpc:passes] after fuse-pointwise (") != std::string::npos);
  CHECK(passes.find("[mlpc:passes]   %h = fused.pointwise @mlpc_fused_gelu_tanh_mul_0") !=
        std::string::npos);
  CHECK(passes.find("[mlpc:passes] after cse (") != std::string::npos);
  CHECK(passes.find("[mlpc:fusion]") == std::string::npos);

  const std::string fusion = mlpc::compile_log(c, {.fusion = true});
  CHECK(fusion.find("[mlpc:fusion] mlpc_fused_gelu_tanh_mul_0: %act -> %h: fused (single user)") !=
        std::string::npos);
  CHECK(fusion.find("[mlpc:passes]") == std::string::npos);

  const std::string code = mlpc::compile_log(c, {.output_code = true});
  CHECK(code.find("[mlpc:output_code] gemm_gate: cuBLASLt matmul bf16[M, 3072] = bf16[M, 768] . "
                  "bf16[3072, 768]^T, epilogue none") != std::string::npos);
  CHECK(code.find("[mlpc:output_code] mlpc_fused_gelu_tanh_mul_0: generated CUDA C++") !=
        std::string::npos);
  CHECK(code.find("__global__") != std::string::npos);
  // Every line is prefixed, so one topic can be grepped out of stderr.
  std::istringstream lines(passes + fusion + code);
  for (std::string line; std::getline(lines, line);) CHECK(line.rfind("[mlpc:", 0) == 0);

  CHECK(mlpc::compile_log(c, {}).empty());
}

TEST_CASE("logs: compile() from the C++ API prints what MLPC_LOGS asks for", "[logs]") {
  const mlpc::ir::Graph g = mlpc::make_sample("linear");
  {
    ScopedEnv env("MLPC_LOGS", "fusion");
    const std::string err = capture_stderr([&] { mlpc::compile(g, no_nvrtc()); });
    CHECK(err.find("[mlpc:fusion] ") != std::string::npos);
    CHECK(err.find("[mlpc:passes]") == std::string::npos);
  }
  {
    ScopedEnv env("MLPC_LOGS", std::nullopt);
    CHECK(capture_stderr([&] { mlpc::compile(g, no_nvrtc()); }).empty());
  }
  ScopedEnv env("MLPC_LOGS", "bogus");
  CHECK_THROWS_AS(mlpc::compile(g, no_nvrtc()), mlpc::Error);
}

TEST_CASE("logs: the CLI prints MLPC_LOGS topics on stderr, and refuses an unknown one",
          "[logs][cli]") {
  ScratchDir tmp;
  auto run = [&](const std::string& logs) {
    const std::string cmd = fmt::format(
        "MLPC_LOGS='{}' timeout 300 '{}' compile --sample geglu >'{}' 2>'{}' </dev/null", logs,
        MLPC_BINARY, (tmp.path / "out").string(), (tmp.path / "err").string());
    const int status = std::system(cmd.c_str());
    return std::pair{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(tmp.path / "err")};
  };
  auto [code, err] = run("passes,output_code");
  CHECK(code == 0);
  CHECK(err.find("[mlpc:passes] after fuse-pointwise") != std::string::npos);
  CHECK(err.find("[mlpc:output_code] mlpc_fused_gelu_tanh_mul_0: generated CUDA C++") !=
        std::string::npos);
  CHECK(err.find("[mlpc:fusion]") == std::string::npos);
  std::tie(code, err) = run("nope");
  CHECK(code == 1);
  CHECK(err == "mlpc: error: MLPC_LOGS: unknown topic 'nope' (known: passes, fusion, "
               "output_code, builds, all)\n");
}

TEST_CASE("logs: a build line says where the CUBIN came from, when and how long", "[logs]") {
  using mlpc::runtime::BuildEvent;
  CHECK(mlpc::runtime::build_log_line({"mlpc_fused_gelu_tanh_mul_0", "sm_90a",
                                       BuildEvent::From::Nvrtc, 2, 93.34, 30.06}) ==
        "[mlpc:builds] +   93.3 ms  thread 2   mlpc_fused_gelu_tanh_mul_0 (sm_90a): NVRTC 30.1 ms\n");
  CHECK(mlpc::runtime::build_log_line({"k", "sm_90", BuildEvent::From::InFlight, 11, 0.0, 120.0}) ==
        "[mlpc:builds] +    0.0 ms  thread 11  k (sm_90): waited for another thread's build "
        "120.0 ms\n");
  CHECK(mlpc::runtime::build_log_line({"k", "sm_90", BuildEvent::From::DiskCache, 1, 5.0, 0.25})
            .find("on-disk cache 0.2 ms") != std::string::npos);
}

TEST_CASE("logs: a timing line says what a decision's plan cost to set up and to time", "[logs]") {
  CHECK(mlpc::runtime::timing_log_line({"mlpc_fused_gelu_tanh_mul_0 (2 steps)", 3, 301.26, 4.12,
                                        15.24, 116.31}) ==
        "[mlpc:builds] +  301.3 ms  thread 3   timed mlpc_fused_gelu_tanh_mul_0 (2 steps): setup "
        "4.1 ms, timing 15.2 ms (116.3 us)\n");
}

TEST_CASE("logs: MLPC_LOGS=builds prints each kernel build as it happens", "[logs][cache]") {
  ScratchDir cache;
  ScopedEnv dir("MLPC_CACHE_DIR", cache.path.string());
  ScopedEnv on("MLPC_NO_KERNEL_CACHE", std::nullopt);
  ScopedEnv logs("MLPC_LOGS", "builds");
  mlpc::CompileOptions o;
  o.arch = "sm_90";
  const mlpc::ir::Graph g = mlpc::make_sample("geglu");
  const std::string first = capture_stderr([&] { mlpc::compile(g, o); });
  INFO(first);
  CHECK(count(first, "[mlpc:builds] ") == 1);  // its one generated kernel
  CHECK(first.find("thread ") != std::string::npos);
  CHECK(first.find("mlpc_fused_gelu_tanh_mul_0 (sm_90): NVRTC ") != std::string::npos);
  const std::string again = capture_stderr([&] { mlpc::compile(g, o); });
  INFO(again);
  CHECK(again.find("mlpc_fused_gelu_tanh_mul_0 (sm_90): on-disk cache ") != std::string::npos);
  {
    ScopedEnv quiet("MLPC_LOGS", "fusion");  // another topic: no build lines
    CHECK(capture_stderr([&] { mlpc::compile(g, o); }).find("[mlpc:builds]") == std::string::npos);
  }
  mlpc::runtime::set_build_log(false);
}

TEST_CASE("logs: threads waiting for a build in flight say so", "[logs][cache]") {
  ScratchDir cache;
  ScopedEnv dir("MLPC_CACHE_DIR", cache.path.string());
  ScopedEnv off("MLPC_NO_KERNEL_CACHE", "1");  // nothing on disk to share: only the build in flight
  const std::string source =
      "extern \"C\" __global__ void mlpc_test_logged_build(float* out) { out[0] = 4.0f; }\n";
  mlpc::runtime::CachedCompiler compiler("sm_90", true);
  constexpr int kThreads = 6;
  std::vector<mlpc::runtime::CachedCompiler::Cubin> got(kThreads);
  mlpc::runtime::set_build_log(true);
  const std::string err = capture_stderr([&] {
    mlpc::test::run_together(kThreads, [&](int t) {
      got[static_cast<size_t>(t)] = compiler.get(source, "mlpc_test_logged_build");
    });
  });
  mlpc::runtime::set_build_log(false);
  INFO(err);
  int built = 0;
  for (const auto& c : got) built += !c.hit;
  CHECK(count(err, "[mlpc:builds] ") == kThreads);
  CHECK(count(err, ": NVRTC ") == built);
  CHECK(count(err, ": waited for another thread's build ") == kThreads - built);
}
