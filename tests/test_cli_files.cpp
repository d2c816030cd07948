// `mlpc run|bench --weights --input --output --save-weights`, run as a separate process on the
// CPU reference: files really decide the result, and every bad file or mismatch is exit 1 with
// one line on stderr, before anything runs.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <fstream>
#include <sstream>

#include "io/file_bytes.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "scratch_dir.h"

namespace {

namespace fs = std::filesystem;
using mlpc::runtime::HostTensor;

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// `mlpc ARGS...` (arguments without quotes or spaces) with stdout and stderr captured.
Result mlpc_cmd(const std::string& args) {
  mlpc::test::ScratchDir tmp;
  std::string cmd = fmt::format("timeout 300 {} {} >{}/out 2>{}/err </dev/null", MLPC_BINARY, args,
                                tmp.path.string(), tmp.path.string());
  int status = std::system(cmd.c_str());
  Result r;
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  r.out = slurp(tmp.path / "out");
  r.err = slurp(tmp.path / "err");
  return r;
}

// An error run: exit 1, nothing on stdout, one line on stderr; returns it.
std::string one_error_line(const Result& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.back() == '\n');
  CHECK(r.err.find('\n') == r.err.size() - 1);
  return r.err;
}

std::string sample(const std::string& name) { return std::string(MLPC_SAMPLES_SOURCE_DIR) + "/" + name; }

// An input for samples/linear.mlp (x: bf16[M, 32]) with `rows` rows, as f32.
HostTensor linear_input(int64_t rows, double scale = 1.0) {
  HostTensor x{mlpc::ir::DType::F32, {rows, 32}, {}};
  for (int64_t i = 0; i < rows * 32; ++i) x.data.push_back(scale * ((i % 7) - 3) / 4.0);
  return x;
}

struct Files {
  mlpc::test::ScratchDir dir;
  std::string path(const std::string& name) const { return (dir.path / name).string(); }
};

}  // namespace

TEST_CASE("mlpc run --device cpu: --save-weights then --weights gives the same output",
          "[cli][files]") {
  Files f;
  Result saved = mlpc_cmd(fmt::format("run --device cpu --sample linear --batch 4 --seed 3 "
                                  "--save-weights {} --output {}",
                                  f.path("w.safetensors"), f.path("y1.npy")));
  REQUIRE(saved.code == 0);
  auto entries = mlpc::io::parse_safetensors(mlpc::io::read_file_bytes(f.path("w.safetensors")), "w");
  REQUIRE(entries.size() == 2);  // y.bias, y.weight: the params only
  CHECK(entries[0].dtype == mlpc::ir::DType::BF16);

  // Another seed: other random weights, unless the saved ones are bound.
  Result other = mlpc_cmd(fmt::format("run --device cpu --sample linear --batch 4 --seed 4 --output {}",
                                  f.path("y2.npy")));
  Result bound = mlpc_cmd(fmt::format("run --device cpu --sample linear --batch 4 --seed 4 --weights {} "
                                  "--output {}",
                                  f.path("w.safetensors"), f.path("y3.npy")));
  REQUIRE(other.code == 0);
  REQUIRE(bound.code == 0);
  // Inputs follow the seed too: only weights and inputs from files make two seeds agree.
  CHECK(mlpc::io::read_file_bytes(f.path("y1.npy")) != mlpc::io::read_file_bytes(f.path("y2.npy")));
  CHECK(mlpc::io::read_file_bytes(f.path("y1.npy")) != mlpc::io::read_file_bytes(f.path("y3.npy")));

  mlpc::io::write_npy(f.path("x.npy"), linear_input(4));
  for (const char* seed : {"3", "4"})
    REQUIRE(mlpc_cmd(fmt::format("run --device cpu --sample linear --seed {} --weights {} --input {} "
                             "--output {}",
                             seed, f.path("w.safetensors"), f.path("x.npy"), f.path(fmt::format("z{}.npy", seed))))
                .code == 0);
  CHECK(mlpc::io::read_file_bytes(f.path("z3.npy")) == mlpc::io::read_file_bytes(f.path("z4.npy")));
}

TEST_CASE("mlpc run: the batch comes from --input and bf16 outputs are written as f32",
          "[cli][files]") {
  Files f;
  mlpc::io::write_npy(f.path("x.npy"), linear_input(3));
  // --input before the positional FILE.mlp: it takes one file, not the graph too.
  Result r = mlpc_cmd(fmt::format("run --device cpu --input {} {} --output {}", f.path("x.npy"),
                              sample("linear.mlp"), f.path("y.npy")));
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("bf16[3, 64]"));
  mlpc::io::NpyArray y = mlpc::io::read_npy(f.path("y.npy"));
  CHECK(y.dtype == mlpc::io::NpyDType::F32);
  CHECK(y.shape == std::vector<int64_t>{3, 64});
}

TEST_CASE("mlpc run: an input changes the output as it should (scaled input, scaled matmul)",
          "[cli][files]") {
  Files f;
  // mlp3_small without biases would be linear; linear has a bias: y(2x) - y(x) = y(x) - y(0).
  mlpc::io::write_npy(f.path("x0.npy"), linear_input(2, 0.0));
  mlpc::io::write_npy(f.path("x1.npy"), linear_input(2, 1.0));
  mlpc::io::write_npy(f.path("x2.npy"), linear_input(2, 2.0));
  for (const char* k : {"0", "1", "2"})
    REQUIRE(mlpc_cmd(fmt::format("run --device cpu --dtype f32 --sample linear --input {} --output {}",
                             f.path(fmt::format("x{}.npy", k)), f.path(fmt::format("y{}.npy", k))))
                .code == 0);
  auto y0 = mlpc::io::read_npy(f.path("y0.npy")).data, y1 = mlpc::io::read_npy(f.path("y1.npy")).data,
       y2 = mlpc::io::read_npy(f.path("y2.npy")).data;
  REQUIRE(y0.size() == 128);
  for (size_t i = 0; i < y0.size(); ++i) CHECK(y2[i] - y1[i] == Approx(y1[i] - y0[i]).margin(1e-5));
}

TEST_CASE("mlpc run: bad weight files are one error line naming the tensor", "[cli][files][errors]") {
  Files f;
  REQUIRE(mlpc_cmd(fmt::format("run --device cpu --sample geglu --batch 1 --save-weights {}",
                           f.path("geglu.safetensors")))
              .code == 0);
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --weights {}",
                                             f.path("geglu.safetensors")))),
             Catch::Contains("geglu.safetensors: error: no tensor 'y.weight' for param %y.weight"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --weights {}",
                                             f.path("missing.safetensors")))),
             Catch::Contains("missing.safetensors: error: cannot read: no such file"));
  std::string bytes = mlpc::io::read_file_bytes(f.path("geglu.safetensors"));
  mlpc::io::write_file_bytes(f.path("cut.safetensors"), bytes.substr(0, 100));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample geglu --weights {}",
                                             f.path("cut.safetensors")))),
             Catch::Contains("cut.safetensors: error: header length"));
  // bench reads its files before it looks for a GPU, so the error is the same anywhere.
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("bench --sample linear --weights {}",
                                             f.path("geglu.safetensors")))),
             Catch::Contains("no tensor 'y.weight'"));
}

TEST_CASE("mlpc run: inputs that do not fit the graph are one error line", "[cli][files][errors]") {
  Files f;
  mlpc::io::write_npy(f.path("x.npy"), linear_input(3));
  HostTensor wide{mlpc::ir::DType::F32, {3, 33}, std::vector<double>(99)};
  mlpc::io::write_npy(f.path("wide.npy"), wide);
  mlpc::io::write_file_bytes(f.path("junk.npy"), "not an array");
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --input {}",
                                             f.path("wide.npy")))),
             Catch::Contains("wide.npy: error: the array has shape (3, 33) but input %x of @linear is bf16[M, 32]"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --input {}",
                                             f.path("junk.npy")))),
             Catch::Contains("junk.npy: error: not a .npy file"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --input {} --input {}",
                                             f.path("x.npy"), f.path("x.npy")))),
             Catch::Contains("@linear takes 1 input(s) (%x): give one --input FILE.npy for each"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --output {} --output {}",
                                             f.path("a.npy"), f.path("b.npy")))),
             Catch::Contains("@linear returns 1 output(s)"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --batch 5 --input {}",
                                             f.path("x.npy")))),
             Catch::Contains("--batch 5 but the --input arrays have 3 rows"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("run --device cpu --sample linear --output {}",
                                             f.path("no/such/dir/y.npy")))),
             Catch::Contains("y.npy: error: cannot write"));
  CHECK_THAT(one_error_line(mlpc_cmd(fmt::format("bench --sample linear --batch 1,2 --input {}",
                                             f.path("x.npy")))),
             Catch::Contains("--input and --output take one batch size"));
}

TEST_CASE("mlpc run: --input a.npy b.npy and --input a.npy --input b.npy are the same",
          "[cli][files]") {
  Files f;
  std::ofstream(f.path("two.mlp")) << "func @two(%a: f32[M, 4], %b: f32[M, 4]) -> f32[M, 4] {\n"
                                      "  %y = sub %a, %b : f32[M, 4]\n"
                                      "  return %y\n}\n";
  mlpc::io::write_npy(f.path("a.npy"), HostTensor{mlpc::ir::DType::F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}});
  mlpc::io::write_npy(f.path("b.npy"), HostTensor{mlpc::ir::DType::F32, {2, 4}, {8, 7, 6, 5, 4, 3, 2, 1}});
  Result one = mlpc_cmd(fmt::format("run --device cpu {} --input {} {} --output {}", f.path("two.mlp"),
                                    f.path("a.npy"), f.path("b.npy"), f.path("y1.npy")));
  Result each = mlpc_cmd(fmt::format("run --device cpu {} --input {} --input {} --output {}",
                                     f.path("two.mlp"), f.path("a.npy"), f.path("b.npy"),
                                     f.path("y2.npy")));
  INFO(one.err << each.err);
  REQUIRE(one.code == 0);
  REQUIRE(each.code == 0);
  CHECK(mlpc::io::read_npy(f.path("y1.npy")).data == mlpc::io::read_npy(f.path("y2.npy")).data);
  // a - b, not b - a: the order is kept.
  CHECK_THAT(one.out, Catch::Contains("first values: -7 -5 -3 -1 1 3 5 7"));
  Result compile = mlpc_cmd(fmt::format("compile {} {}", f.path("two.mlp"), f.path("a.npy")));
  CHECK(compile.code == 2);
  CHECK_THAT(compile.err, Catch::Contains("a.npy: this command takes no .npy inputs"));
}

TEST_CASE("mlpc run: NaN or Inf in an input or a weight is a warning naming where",
          "[cli][files]") {
  Files f;
  HostTensor x = linear_input(2);
  x.data[33] = std::nan("");
  mlpc::io::write_npy(f.path("x.npy"), x);
  Result r = mlpc_cmd(fmt::format("run --device cpu {} --input {}", sample("linear.mlp"),
                                  f.path("x.npy")));
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.err, Catch::Contains("mlpc: warning: " + f.path("x.npy") +
                                    ": input %x holds NaN at [1, 1] (1 non-finite value)"));
  // Weights: save the seeded ones, put an Inf in, bind them back.
  REQUIRE(mlpc_cmd(fmt::format("run --device cpu --sample linear --batch 1 --save-weights {}",
                               f.path("w.safetensors"))).code == 0);
  std::string bytes = mlpc::io::read_file_bytes(f.path("w.safetensors"));
  std::map<std::string, HostTensor> tensors;
  for (const auto& e : mlpc::io::parse_safetensors(bytes, "w"))
    tensors[e.name] = mlpc::io::decode_tensor(bytes, e);
  REQUIRE(tensors.count("y.weight"));
  tensors["y.weight"].data[5] = -INFINITY;
  tensors["y.weight"].data[6] = INFINITY;
  std::ofstream(f.path("w2.safetensors"), std::ios::binary)
      << mlpc::io::encode_safetensors(tensors);
  Result w = mlpc_cmd(fmt::format("run --device cpu --sample linear --batch 1 --weights {}",
                                  f.path("w2.safetensors")));
  INFO(w.err);
  CHECK_THAT(w.err, Catch::Contains(": tensor y.weight holds -Inf at [0, 5] (2 non-finite values)"));
}
