// MLPC_LOGS=passes,fusion,output_code: what compile() prints to stderr, from the C++ API (here)
// and the CLI (a child process), and the one-line error for an unknown topic.
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
#include "runtime/scoped_env.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using mlpc::runtime::ScopedEnv;
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
  t = mlpc::parse_log_topics("all");
  CHECK((t.passes && t.fusion && t.output_code));
  CHECK_FALSE(mlpc::parse_log_topics("").any());
  CHECK_FALSE(mlpc::parse_log_topics(",,").any());
}

TEST_CASE("logs: an unknown topic is one error line naming the known ones", "[logs][error]") {
  CHECK_THROWS_WITH(mlpc::parse_log_topics("passes,kernels"),
                    "MLPC_LOGS: unknown topic 'kernels' (known: passes, fusion, output_code, all)");
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
               "output_code, all)\n");
}
