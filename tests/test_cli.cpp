// The `mlpc` command line, run as a separate process (the contracts in design.md): what it prints,
// its exit codes, and that every error is exactly one line on stderr, never a crash or a hang.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/samples.h"
#include "ir/parser.h"
#include "runtime/device/device.h"
#include "host/host_tensor.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;       // the exit status; 128 + N when killed by signal N
  std::string out;     // stdout
  std::string err;     // stderr
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  q += '\'';
  return q;
}

// A fresh, empty folder under the temp dir, removed when the test ends.
struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / fmt::format("mlpc_test_cli_{}_{}", ::getpid(), n++);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Runs `mlpc ARGS...` with stdout and stderr each redirected into a temp file. A hang is a
// failure too: `timeout` ends the run after a while and the exit code says so (124).
Result run_mlpc(const std::vector<std::string>& args) {
  TempDir tmp;
  fs::path out = tmp.path / "stdout", err = tmp.path / "stderr";
  std::string cmd = fmt::format("timeout 300 {}", shell_quote(MLPC_BINARY));
  for (const std::string& a : args) cmd += fmt::format(" {}", shell_quote(a));
  cmd += fmt::format(" >{} 2>{} </dev/null", shell_quote(out.string()), shell_quote(err.string()));
  int status = std::system(cmd.c_str());
  Result r;
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  else if (status != -1 && WIFSIGNALED(status)) r.code = 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

// An error run: nothing on stdout, exactly one newline-terminated line on stderr; returns it.
std::string one_error_line(const Result& r) {
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(lines(r.err).size() == 1);
  return lines(r.err).front();
}

std::string data(const std::string& name) { return fmt::format("{}/{}", MLPC_TEST_DATA_DIR, name); }
std::string sample_file(const std::string& name) {
  return fmt::format("{}/../../samples/{}", MLPC_TEST_DATA_DIR, name);
}

nlohmann::json compile_json(std::vector<std::string> args) {
  args.insert(args.begin(), "compile");
  args.push_back("--json");
  Result r = run_mlpc(args);
  INFO("mlpc " << fmt::format("{}", fmt::join(args, " ")) << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  nlohmann::json j;
  REQUIRE_NOTHROW(j = nlohmann::json::parse(r.out));
  REQUIRE(j.is_object());
  REQUIRE(j.contains("launches"));
  REQUIRE(j.contains("kernels"));
  REQUIRE(j["kernels"].is_array());
  return j;
}

std::vector<std::string> kinds(const nlohmann::json& j) {
  std::vector<std::string> v;
  for (const auto& k : j["kernels"]) v.push_back(k.at("kind").get<std::string>());
  return v;
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("mlpc samples lists the built-in samples", "[cli]") {
  Result r = run_mlpc({"samples"});
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  Strings names;
  for (const std::string& l : lines(r.out)) names.push_back(l.substr(0, l.find(' ')));
  for (const char* want : {"linear", "geglu", "mlp3"}) {
    INFO("mlpc samples:\n" << r.out);
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  }
  Strings registered;
  for (const mlpc::SampleInfo& s : mlpc::samples()) registered.push_back(s.name);
  CHECK(names == registered);
  // Descriptions start in one column, past the longest name ("llama_geglu" has 11 characters).
  std::set<size_t> columns;
  for (const std::string& l : lines(r.out)) columns.insert(l.find_first_not_of(' ', l.find(' ')));
  CHECK(columns.size() == 1);
}

TEST_CASE("mlpc compile --json: launches and kernels of the samples", "[cli]") {
  SECTION("geglu fuses gelu_tanh * mul into one kernel") {
    nlohmann::json j = compile_json({"--sample", "geglu"});
    CHECK(j["launches"] == 4);
    CHECK(kinds(j) == Strings{"gemm", "gemm", "pointwise", "gemm"});
    REQUIRE(j["kernels"].size() == 4);
    const nlohmann::json& pw = j["kernels"][2];
    CHECK(pw.at("ops").get<Strings>() == Strings{"gelu_tanh", "mul"});
    CHECK(pw.at("name").get<std::string>().rfind("mlpc_fused_", 0) == 0);
    for (const auto& k : j["kernels"]) {
      CHECK(k.at("name").is_string());
      CHECK(k.at("ops").is_array());
    }
  }
  SECTION("geglu --no-fusion: one kernel per op") {
    nlohmann::json j = compile_json({"--sample", "geglu", "--no-fusion"});
    CHECK(j["launches"] == 5);
    CHECK(kinds(j) == Strings{"gemm", "gemm", "pointwise", "pointwise", "gemm"});
  }
  SECTION("mlp3") {
    CHECK(compile_json({"--sample", "mlp3"})["launches"] == 6);
    CHECK(compile_json({"--sample", "mlp3", "--no-fusion"})["launches"] == 8);
  }
  SECTION("linear") {
    CHECK(compile_json({"--sample", "linear"})["launches"] == 2);
    CHECK(compile_json({"--sample", "linear", "--no-fusion"})["launches"] == 2);
  }
  SECTION("--batch and --dtype are taken") {
    nlohmann::json j = compile_json({"--sample", "linear", "--batch", "7", "--dtype", "f16"});
    CHECK(j["batch"] == 7);
    CHECK(j["launches"] == 2);
  }
}

TEST_CASE("mlpc compile of samples/geglu.mlp plans the same kernels as --sample geglu", "[cli]") {
  REQUIRE(fs::exists(sample_file("geglu.mlp")));
  nlohmann::json from_file = compile_json({sample_file("geglu.mlp"), "--batch", "8192"});
  nlohmann::json from_sample = compile_json({"--sample", "geglu", "--batch", "8192"});
  CHECK(from_file["launches"] == from_sample["launches"]);
  CHECK(from_file["kernels"].dump(1) == from_sample["kernels"].dump(1));
}

TEST_CASE("mlpc compile --dump-dir writes the IR after each pass and the kernels", "[cli]") {
  TempDir tmp;
  fs::path dir = tmp.path / "dump";
  Result r = run_mlpc({"compile", "--sample", "geglu", "--dump-dir", dir.string()});
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(fs::is_regular_file(dir / "00-input.mlp"));
  CHECK(fs::is_regular_file(dir / "fusion.txt"));
  CHECK(fs::is_regular_file(dir / "plan.txt"));
  CHECK(fs::file_size(dir / "plan.txt") > 0);

  int fused_ir = 0, cu = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".mlp") continue;
    if (name.find("fuse-pointwise") != std::string::npos) {
      ++fused_ir;
      CHECK(slurp(e.path()).find("fused.pointwise") != std::string::npos);
    }
    // Every dumped IR is valid text: it parses back.
    INFO("dumped IR: " << e.path());
    CHECK_NOTHROW(mlpc::ir::parse_file(e.path().string()));
  }
  CHECK(fused_ir == 1);
  REQUIRE(fs::is_directory(dir / "kernels"));
  for (const auto& e : fs::directory_iterator(dir / "kernels")) {
    if (e.path().extension() != ".cu") continue;
    ++cu;
    CHECK(fs::file_size(e.path()) > 0);
  }
  CHECK(cu == 1);  // gelu_tanh * mul; the GEMMs are cuBLASLt calls, not .cu files
}

TEST_CASE("mlpc: an unknown sample is one error line", "[cli]") {
  Strings names;
  for (const mlpc::SampleInfo& s : mlpc::samples()) names.push_back(s.name);
  std::string want = fmt::format("mlpc: error: unknown sample 'nope' (known: {})",
                                 fmt::join(names, ", "));
  for (const char* cmd : {"compile", "run", "bench"}) {
    INFO("mlpc " << cmd << " --sample nope");
    Result r = run_mlpc({cmd, "--sample", "nope"});
    CHECK(r.code == 1);
    CHECK(one_error_line(r) == want);
  }
}

TEST_CASE("mlpc: bad .mlp text is one 'file:line:col: error:' line", "[cli]") {
  struct Case {
    const char* file;
    const char* where;  // line:col
    const char* what;   // the rest of the message
  };
  const Case cases[] = {
      {"bad_unknown_op.mlp", "3:8", "unknown op 'frobnicate'"},
      {"bad_type_mismatch.mlp", "4:24",
       "declared type f32[M, 4] does not match inferred type f32[M, 8]"},
      {"bad_undefined_value.mlp", "3:13", "use of undefined value %q"},
      {"bad_syntax.mlp", "3:16", "expected ':', got 'f32'"},
      {"bad_unterminated.mlp", "2:37", "unterminated function body: no closing '}'"},
      {"bad_empty.mlp", "1:1", "expected 'func', got end of file"},
  };
  for (const Case& c : cases) {
    for (Strings args : {Strings{"compile", data(c.file)},
                         Strings{"run", data(c.file), "--device", "cpu"}}) {
      INFO("mlpc " << fmt::format("{}", fmt::join(args, " ")));
      Result r = run_mlpc(args);
      CHECK(r.code == 1);
      CHECK(one_error_line(r) == fmt::format("{}:{}: error: {}", data(c.file), c.where, c.what));
    }
  }
  // Type errors found by shape inference name the node as well as the place.
  Result r = run_mlpc({"compile", data("bad_dtype_mix.mlp")});
  CHECK(r.code == 1);
  std::string line = one_error_line(r);
  CHECK(line.rfind(data("bad_dtype_mix.mlp") + ":3:8: error: node %y (mul ", 0) == 0);
}

TEST_CASE("mlpc: a missing file is one 'cannot read file' line", "[cli]") {
  std::string path = data("no_such_file.mlp");
  for (const char* cmd : {"compile", "run", "bench"}) {
    INFO("mlpc " << cmd << " " << path);
    Result r = run_mlpc({cmd, path});
    CHECK(r.code == 1);
    CHECK(one_error_line(r) == path + ": error: cannot read file: No such file or directory");
  }
  Result dir = run_mlpc({"compile", MLPC_TEST_DATA_DIR});  // a folder is not a file either
  CHECK(dir.code == 1);
  CHECK(one_error_line(dir).rfind(std::string(MLPC_TEST_DATA_DIR) + ": error: cannot read file",
                                  0) == 0);
}

TEST_CASE("mlpc: bad flags are one error line and a usage exit code", "[cli]") {
  struct Case {
    Strings args;
    int code;
    std::string starts_with;  // the whole line when `exact`
    bool exact;
  };
  const Case cases[] = {
      {{"compile", "--sample", "geglu", "--batch", "0"}, 2, "mlpc: error: --batch: ", false},
      {{"compile", "--sample", "geglu", "--batch", "-5"}, 2, "mlpc: error: --batch: ", false},
      {{"compile", "--sample", "geglu", "--batch", "lots"}, 2, "mlpc: error: --batch: ", false},
      {{"compile", "--sample", "geglu", "--dtype", "f64"}, 2, "mlpc: error: --dtype: ", false},
      {{"run", "--sample", "linear", "--device", "tpu"}, 2, "mlpc: error: --device: ", false},
      {{"compile", "--sample", "linear", "--arch", "sm_xx"}, 2, "mlpc: error: --arch: 'sm_xx' ",
       false},
      {{"compile", "--sample", "linear", "--arch", "sm_1000"}, 2,
       "mlpc: error: --arch: 'sm_1000' is not an arch NVRTC can compile for (it can: sm_", false},
      {{"compile", "--sample", "geglu", "--frobnicate"}, 2, "mlpc: error: ", false},
      {{"compile", "--sample"}, 2, "mlpc: error: ", false},
      {{"frobnicate"}, 2, "mlpc: error: ", false},
      {{"compile", "--sample", "geglu", sample_file("geglu.mlp")}, 2,
       "mlpc: error: give either --sample NAME or a FILE.mlp, not both", true},
      {{"compile"}, 2, "mlpc: error: give either --sample NAME or a FILE.mlp", true},
      {{"run", "--device", "cpu"}, 2, "mlpc: error: give either --sample NAME or a FILE.mlp", true},
      {{"bench"}, 2, "mlpc: error: give either --sample NAME or a FILE.mlp", true},
  };
  for (const Case& c : cases) {
    INFO("mlpc " << fmt::format("{}", fmt::join(c.args, " ")));
    Result r = run_mlpc(c.args);
    CHECK(r.code == c.code);
    std::string line = one_error_line(r);
    if (c.exact)
      CHECK(line == c.starts_with);
    else
      CHECK(line.rfind(c.starts_with, 0) == 0);
    CHECK(line.find("--help") == std::string::npos);
  }
}

TEST_CASE("mlpc --help is help, not an error", "[cli]") {
  Result top = run_mlpc({"--help"});
  CHECK(top.code == 0);
  CHECK(top.out.find("compile") != std::string::npos);
  Result sub = run_mlpc({"compile", "--help"});
  CHECK(sub.code == 0);
  CHECK(sub.out.find("--sample") != std::string::npos);
}

TEST_CASE("mlpc run --device cpu runs the reference interpreter", "[cli]") {
  Result r = run_mlpc({"run", "--sample", "linear", "--device", "cpu", "--batch", "2"});
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  REQUIRE(lines(r.out).size() >= 2);
  CHECK(lines(r.out)[1].rfind("output 0: bf16[2, 64]", 0) == 0);

  Result f = run_mlpc({"run", sample_file("linear.mlp"), "--device", "cpu", "--batch", "3"});
  INFO("stderr: " << f.err);
  REQUIRE(f.code == 0);
  REQUIRE(lines(f.out).size() >= 2);
  CHECK(lines(f.out)[1].rfind("output 0: bf16[3, 64]", 0) == 0);
}

TEST_CASE("a file with static shapes says --batch has no effect", "[cli]") {
  mlpc::test::ScratchDir dir;
  const std::string file = (dir.path / "static.mlp").string();
  std::ofstream(file) << "func @s(%x: f32[16, 32]) -> f32[16, 8] {\n"
                         "  %w = param f32[8, 32]\n"
                         "  %y = matmul %x, %w : f32[16, 8]\n"
                         "  return %y\n}\n";
  Result r = run_mlpc({"compile", file, "--batch", "64"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err == "mlpc: note: @s has static shapes (no batch dim M): --batch has no effect\n");
  CHECK(r.out.find("plan for @s (static shapes): 1 launch") != std::string::npos);
  Result quiet = run_mlpc({"compile", file});
  CHECK(quiet.err.empty());
}

TEST_CASE("mlpc compile -O2 says each decision once and how every GEMM runs", "[cli]") {
  Result r = run_mlpc({"compile", "--sample", "ffn", "-O2"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.code == 0);
  Strings all = lines(r.out);
  auto section = [&](const std::string& title) {
    Strings body;
    auto it = std::find(all.begin(), all.end(), title);
    REQUIRE(it != all.end());
    for (++it; it != all.end() && !it->empty(); ++it) body.push_back(*it);
    return body;
  };
  Strings decisions = section("// fusion decisions");
  CHECK(std::set<std::string>(decisions.begin(), decisions.end()).size() == decisions.size());
  Strings gemms = section("// GEMMs: how each one runs, and why");
  for (const char* step : {"gemm_gate:", "gemm_up:", "gemm_y:"})
    CHECK(std::any_of(gemms.begin(), gemms.end(),
                      [&](const std::string& l) { return l.rfind(step, 0) == 0; }));
}

TEST_CASE("mlpc run --device cpu --dtype bf16 writes bf16 values, and says so", "[cli]") {
  Result r = run_mlpc({"run", "--sample", "geglu", "--device", "cpu", "--batch", "2"});
  INFO("stderr: " << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(lines(r.out).size() >= 3);
  CHECK(lines(r.out)[0] == "the fp64 reference (CPU), each output rounded to its dtype");
  // "  first values: v0 v1 ...": each one a bf16 value (8 significant bits).
  std::istringstream first(lines(r.out)[2].substr(lines(r.out)[2].find(':') + 1));
  int checked = 0;
  for (double v; first >> v; ++checked)
    CHECK(mlpc::runtime::round_to(mlpc::ir::DType::BF16, v) == Approx(v).epsilon(1e-4));
  CHECK(checked == 8);
}

TEST_CASE("mlpc run/bench on the GPU say in one line when there is none", "[cli]") {
  std::optional<std::string> why = mlpc::runtime::gpu_unavailable_reason();
  if (!why) {
    WARN("a usable CUDA GPU is here: the no-GPU messages of run and bench are not checked");
    return;
  }
  // Dev and CI machines have no driver: "cudaGetDeviceCount returned 35 (CUDA driver version is
  // insufficient for CUDA runtime version)". The binary must say what this process sees.
  CHECK(why->rfind("no NVIDIA driver or GPU found: cudaGetDeviceCount returned 35 ", 0) == 0);
  CHECK_THAT(*why, Catch::EndsWith("; libcuda.so.1 is not installed"));
  for (Strings args : {Strings{"run", "--sample", "linear", "--device", "cuda"},
                       Strings{"run", "--sample", "linear"},
                       Strings{"bench", "--sample", "linear"},
                       Strings{"bench", "--sample", "linear", "--json"}}) {
    INFO("mlpc " << fmt::format("{}", fmt::join(args, " ")));
    Result r = run_mlpc(args);
    CHECK(r.code == 3);
    // run, whose default device is the GPU, points at the CPU reference.
    const std::string hint =
        args[0] == "run" ? "; `mlpc run --device cpu` runs the fp64 reference instead" : "";
    CHECK(one_error_line(r) == "mlpc: error: " + *why + hint);
  }
}

TEST_CASE("the README's first command builds only what it runs, and names every sample",
          "[cli][readme]") {
  std::ifstream in(fmt::format("{}/../../README.md", MLPC_TEST_DATA_DIR));
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string readme = text.str();
  const size_t demo = readme.find("build/compiler/mlpc demo");
  REQUIRE(demo != std::string::npos);
  const std::string first = readme.substr(readme.rfind('\n', demo) + 1,
                                          readme.find('\n', demo) - readme.rfind('\n', demo));
  CHECK(first.find("--target mlpc ") != std::string::npos);
  const size_t row = readme.find("| `mlpc samples` |");
  REQUIRE(row != std::string::npos);
  const std::string line = readme.substr(row, readme.find('\n', row) - row);
  for (const mlpc::SampleInfo& s : mlpc::samples()) CHECK_THAT(line, Catch::Contains("`" + s.name + "`"));
}
