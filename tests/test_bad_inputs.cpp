// The bad-input catalogue (docs/cli.md, "Exit codes and bad input"): each kind of bad input,
// the exact message mlpc prints and its exit code, one test per row. Rows that need a GPU live
// in tests/gpu/test_gpu_bad_inputs.cpp. Also the resource bounds: huge dims, deep graphs, giant
// files, and the kernel cache under concurrent mlpc processes.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/plan_builder.h"
#include "error_of.h"
#include "io/safetensors.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/fuse_pointwise.h"
#include "passes/pipeline.h"
#include "runtime/device/device.h"
#include "runtime/jit/kernel_cache.h"
#include "runtime/jit/nvrtc_compiler.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using Strings = std::vector<std::string>;

struct Result {
  int code = -1;  // exit status; 128 + N when killed by signal N
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string data(const std::string& name) { return std::string(MLPC_TEST_DATA_DIR) + "/" + name; }

// `mlpc ARGS...` as a separate process (with ENV assignments in front), stdout and stderr kept.
std::string mlpc_command(const Strings& args, const fs::path& out, const fs::path& err,
                         const std::string& env = "") {
  std::string cmd = env + (env.empty() ? "" : " ") + "timeout 300 " + quote(MLPC_BINARY);
  for (const std::string& a : args) cmd += " " + quote(a);
  return cmd + " >" + quote(out.string()) + " 2>" + quote(err.string()) + " </dev/null";
}

int exit_code(int status) {
  if (status != -1 && WIFEXITED(status)) return WEXITSTATUS(status);
  if (status != -1 && WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

Result run_mlpc(const Strings& args) {
  mlpc::test::ScratchDir tmp;
  fs::path out = tmp.path / "out", err = tmp.path / "err";
  Result r;
  r.code = exit_code(std::system(mlpc_command(args, out, err).c_str()));
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// One catalogue row checked through the CLI: exit code, the whole of stderr (one line), no
// stdout.
void check_row(const Strings& args, int code, const std::string& message) {
  INFO("mlpc " << fmt::format("{}", fmt::join(args, " ")));
  Result r = run_mlpc(args);
  CHECK(r.code == code);
  CHECK(r.err == message + "\n");
  CHECK(r.out.empty());
}

// The same, when the tail of the message depends on the machine: stderr starts with PREFIX.
void check_row_prefix(const Strings& args, int code, const std::string& prefix) {
  INFO("mlpc " << fmt::format("{}", fmt::join(args, " ")));
  Result r = run_mlpc(args);
  CHECK(r.code == code);
  CHECK(r.err.rfind(prefix, 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.out.empty());
}

using mlpc::test::error_of;

// A chain of N unary pointwise ops on one input: the deepest graph N nodes can make.
std::string chain_text(int n) {
  std::string t = "func @deep(%v0: f32[M, 8]) -> f32[M, 8] {\n";
  for (int i = 1; i <= n; ++i)
    t += fmt::format("  %v{} = {} %v{} : f32[M, 8]\n", i, i % 2 ? "relu" : "neg", i - 1);
  return t + fmt::format("  return %v{}\n}}\n", n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

// ---- the catalogue, row by row ----

TEST_CASE("bad input: unparsable text", "[bad_input]") {
  check_row({"compile", data("bad_syntax.mlp")}, 1,
            data("bad_syntax.mlp") + ":3:16: error: expected ':', got 'f32'");
  check_row({"compile", data("bad_unterminated.mlp")}, 1,
            data("bad_unterminated.mlp") +
                ":2:37: error: unterminated function body: no closing '}'");
}

TEST_CASE("bad input: wrong types or shapes", "[bad_input]") {
  check_row({"compile", data("bad_type_mismatch.mlp")}, 1,
            data("bad_type_mismatch.mlp") +
                ":4:24: error: declared type f32[M, 4] does not match inferred type f32[M, 8]");
  check_row({"run", data("bad_type_mismatch.mlp"), "--device", "cpu"}, 1,
            data("bad_type_mismatch.mlp") +
                ":4:24: error: declared type f32[M, 4] does not match inferred type f32[M, 8]");
}

TEST_CASE("bad input: a region whose kernel symbol is not a C identifier", "[bad_input]") {
  check_row({"compile", data("bad_kernel_symbol.mlp")}, 1,
            data("bad_kernel_symbol.mlp") +
                ":4:3: error: node %k (fused.pointwise): kernel symbol '0k' is not a C "
                "identifier ([A-Za-z_][A-Za-z0-9_]*)");
}

TEST_CASE("bad input: unknown ops", "[bad_input]") {
  check_row({"compile", data("bad_unknown_op.mlp")}, 1,
            data("bad_unknown_op.mlp") + ":3:8: error: unknown op 'frobnicate'");
}

TEST_CASE("bad input: dims that overflow", "[bad_input]") {
  check_row({"compile", data("bad_dim_overflow.mlp")}, 1,
            data("bad_dim_overflow.mlp") +
                ":2:20: error: dim 99999999999999999999 is too large (the limit is 1099511627776)");
  check_row({"compile", data("bad_too_many_elements.mlp")}, 1,
            data("bad_too_many_elements.mlp") +
                ":3:8: error: node %w (param): tensor of [1048576, 1048576] elements is too "
                "large (the limit is 68719476736)");
}

TEST_CASE("bad input: a file that cannot be read", "[bad_input]") {
  check_row({"compile", data("no_such_file.mlp")}, 1,
            data("no_such_file.mlp") + ": error: cannot read file: No such file or directory");
}

TEST_CASE("bad input: a giant file is refused before it is read", "[bad_input][bounds]") {
  mlpc::test::ScratchDir tmp;
  fs::path big = tmp.path / "big.mlp";
  { std::ofstream(big.string()) << "# sparse\n"; }
  fs::resize_file(big, uint64_t{1} << 40);  // 1 TiB, sparse: costs no disk
  auto t0 = std::chrono::steady_clock::now();
  check_row({"compile", big.string()}, 1,
            big.string() + ": error: file is 1099511627776 bytes; the limit is 67108864 bytes "
                           "(64 MiB)");
  CHECK(seconds_since(t0) < 20);  // not read: reading 1 TiB would take far longer
}

TEST_CASE("bad input: a weights file that does not match the graph", "[bad_input]") {
  // The linear sample's params are y.weight bf16[64, 32] and y.bias bf16[64].
  using mlpc::runtime::HostTensor;
  auto tensor = [](std::vector<int64_t> dims) {
    HostTensor t{mlpc::ir::DType::BF16, dims, {}};
    t.data.assign(static_cast<size_t>(t.numel()), 0.5);
    return t;
  };
  mlpc::test::ScratchDir tmp;
  auto write = [&](const std::string& name, const std::map<std::string, HostTensor>& tensors) {
    std::string path = (tmp.path / name).string();
    std::ofstream(path, std::ios::binary) << mlpc::io::encode_safetensors(tensors);
    return path;
  };
  std::string transposed =
      write("transposed.safetensors", {{"y.weight", tensor({32, 64})}, {"y.bias", tensor({64})}});
  check_row({"run", "--sample", "linear", "--device", "cpu", "--weights", transposed}, 1,
            transposed + ": error: tensor 'y.weight' has shape [32, 64] but param %y.weight of "
                         "@linear is bf16[64, 32]");
  std::string missing = write("missing.safetensors", {{"y.weight", tensor({64, 32})}});
  check_row({"run", "--sample", "linear", "--device", "cpu", "--weights", missing}, 1,
            missing + ": error: no tensor 'y.bias' for param %y.bias (bf16[64]) of @linear");
  std::string truncated = (tmp.path / "truncated.safetensors").string();
  std::ofstream(truncated, std::ios::binary) << std::string("\x10\0\0\0\0\0\0\0{}", 10);
  check_row_prefix({"run", "--sample", "linear", "--device", "cpu", "--weights", truncated}, 1,
                   truncated + ": error: ");
}

TEST_CASE("bad input: bad flags", "[bad_input]") {
  check_row({"compile", "--sample", "geglu", "--batch", "0"}, 2,
            "mlpc: error: --batch: Value 0 not in range 1 to 16777216");
  check_row({"compile", "--sample", "geglu", "--opt-level", "7"}, 2,
            "mlpc: error: --opt-level: Value 7 not in range 0 to 2");
  check_row_prefix({"compile", "--sample", "nope"}, 1,
                   "mlpc: error: unknown sample 'nope' (known: linear, geglu, ");
}

TEST_CASE("bad input: no GPU", "[bad_input]") {
  std::optional<std::string> why = mlpc::runtime::gpu_unavailable_reason();
  if (!why) {
    WARN("a usable CUDA GPU is here: the no-GPU row is checked on machines without one");
    return;
  }
  check_row({"run", "--sample", "linear"}, 3,
            "mlpc: error: " + *why + "; `mlpc run --device cpu` runs the fp64 reference instead");
  check_row({"bench", "--sample", "mlp3"}, 3, "mlpc: error: " + *why);
  check_row_prefix({"run", "--sample", "linear"}, 3, "mlpc: error: no NVIDIA driver or GPU found: ");
}

TEST_CASE("bad input: a kernel that fails to compile", "[bad_input]") {
  // Generated kernels always compile (every sample's are built in test_nvrtc); a broken one is
  // reported with its name, the arch and NVRTC's log, and the CLI prints it with exit code 1.
  std::string msg = error_of([] {
    mlpc::runtime::compile_to_cubin("extern \"C\" __global__ void k_bad() { undefined_thing; }",
                                    "k_bad", "sm_90");
  });
  std::string first = msg.substr(0, msg.find('\n'));
  CHECK(first == "kernel k_bad failed to compile for sm_90:");
  CHECK(msg.find("undefined_thing") != std::string::npos);  // the log follows
  CHECK(msg.find("error") != std::string::npos);
  CHECK(error_of([] { mlpc::runtime::compile_to_cubin("", "k_arch", "sm_9x"); }) ==
        "kernel k_arch: bad GPU arch 'sm_9x' (expected e.g. sm_90)");
}

// ---- resource bounds ----

TEST_CASE("bounds: a deep graph compiles in linear time without deep recursion", "[bounds]") {
  // 100k chained ops: parse, print, every pass (fused: regions of kMaxRegionOps ops; eager: 100k
  // kernels) and codegen. Quadratic work or recursion per node would blow the time or the stack.
  const int n = 100'000;
  std::string text = chain_text(n);
  auto t0 = std::chrono::steady_clock::now();
  mlpc::ir::Graph g = mlpc::ir::parse(text, "deep.mlp");
  CHECK(g.size() == n + 2);
  CHECK(mlpc::ir::print(g).size() > text.size() / 2);
  for (bool fusion : {true, false}) {
    auto r = mlpc::passes::run_pipeline(g, {.fusion = fusion, .epilogues = false});
    mlpc::codegen::Plan plan = mlpc::codegen::build_plan(r.graph);
    const int regions = static_cast<int>((n + mlpc::passes::kMaxRegionOps - 1) /
                                         mlpc::passes::kMaxRegionOps);
    CHECK(plan.launches() == (fusion ? regions : n));
  }
  CHECK(seconds_since(t0) < 300);  // seconds in a Release build; quadratic work would take hours
}

TEST_CASE("bounds: more nodes than the parser's limit fail fast", "[bounds]") {
  std::string msg = error_of([] { mlpc::ir::parse(chain_text(1'000'000), "huge.mlp"); });
  CHECK(msg == "huge.mlp:1000001:3: error: too many nodes (the limit is 1000000)");
}

TEST_CASE("bounds: the kernel cache survives concurrent mlpc processes", "[bounds][cache]") {
  // Several processes compile the same graph into one empty cache at once: every entry they
  // leave is whole (load() checks magic, length and checksum), no temp file is left behind, and
  // a later compile takes every kernel from the cache.
  mlpc::test::ScratchDir tmp;
  const std::string env = "MLPC_CACHE_DIR=" + quote(tmp.path.string());
  const Strings args = {"compile", "--sample", "mlp3_small", "--no-fusion"};
  const int procs = 4;
  std::string script;
  for (int i = 0; i < procs; ++i)
    script += mlpc_command(args, tmp.path / fmt::format("out{}", i),
                           tmp.path / fmt::format("err{}", i), env) +
              fmt::format(" ; echo $? >{} &\n", quote((tmp.path / fmt::format("rc{}", i)).string()));
  script += "wait\n";
  REQUIRE(std::system(("bash -c " + quote(script)).c_str()) == 0);
  for (int i = 0; i < procs; ++i) {
    INFO("process " << i << ": " << slurp(tmp.path / fmt::format("err{}", i)));
    CHECK(slurp(tmp.path / fmt::format("rc{}", i)) == "0\n");
  }
  mlpc::runtime::KernelCache cache(tmp.path.string());
  REQUIRE(cache.enabled());
  int entries = 0;
  for (const auto& e : fs::directory_iterator(cache.dir())) {
    std::string name = e.path().filename().string();
    INFO("cache file " << name);
    CHECK(e.path().extension() == ".cubin");  // no leftover ".<key>.<pid>.<random>.tmp"
    CHECK(cache.load(e.path().stem().string()).has_value());
    ++entries;
  }
  // mlp3_small eager: 3 bias adds and 2 relus, each kind one kernel (the same op on the same
  // types builds once).
  CHECK(entries == 2);
  mlpc::test::ScratchDir out;
  fs::path o = out.path / "out", e = out.path / "err";
  REQUIRE(exit_code(std::system(mlpc_command(args, o, e, env).c_str())) == 0);
  CHECK(slurp(o).find("built by NVRTC in") != std::string::npos);
  CHECK(slurp(o).find(": 0 built by NVRTC") != std::string::npos);
}
