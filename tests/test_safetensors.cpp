// The safetensors reader and writer (io/safetensors.h) and binding weights to a graph
// (io/bind.h): round trips, and one error test per kind of bad file or mismatch. Every error is
// one line, "PATH: error: ...", naming the tensor.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "io/bind.h"
#include "io/file_bytes.h"
#include "io/safetensors.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "host/random_init.h"
#include "scratch_dir.h"

using namespace mlpc;
using runtime::HostTensor;

namespace {

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A file from its header text and data section.
std::string file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}

// The error parsing `bytes` gives; it must be one line starting "w.st: error: ".
std::string parse_error(const std::string& bytes) {
  try {
    io::parse_safetensors(bytes, "w.st");
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("w.st: error: ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  }
  FAIL("parse_safetensors accepted a bad file");
  return {};
}

std::string one_tensor(const std::string& fields, size_t data_bytes) {
  return file("{\"w\":{" + fields + "}}", std::string(data_bytes, '\0'));
}

const char* kGraph = R"(
func @lin(%x: f32[M, 3]) -> f32[M, 2] {
  %fc.weight = param f32[2, 3]
  %fc.mm = matmul %x, %fc.weight : f32[M, 2]
  %fc.bias = param f32[2]
  %fc = add %fc.mm, %fc.bias : f32[M, 2]
  return %fc
})";

io::NamedTensors lin_weights(ir::DType t = ir::DType::F32) {
  return {{"fc.weight", {t, {2, 3}, {1, -2, 3, 0.5, 0.25, -0.125}}},
          {"fc.bias", {t, {2}, {10, -20}}}};
}

std::string bind_error(const ir::Graph& g, const std::string& bytes) {
  io::NamedTensors values;
  try {
    io::bind_weights(g, bytes, "w.st", values);
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("w.st: error: ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  }
  FAIL("bind_weights accepted a mismatched file");
  return {};
}

}  // namespace

TEST_CASE("safetensors: encode then parse gives back names, dtypes, shapes and values",
          "[safetensors]") {
  io::NamedTensors in = {{"a.weight", {ir::DType::F32, {2, 3}, {1, 2, 3, -4, 5.5, 1e-3}}},
                         {"b", {ir::DType::BF16, {4}, {1, -0.5, 256, 3.140625}}},
                         {"c", {ir::DType::F16, {2, 2}, {0.1, 65504, -2, 0}}},
                         {"empty", {ir::DType::F32, {0, 5}, {}}}};
  for (auto& [name, t] : in)
    for (double& v : t.data) v = runtime::round_to(t.dtype, v);
  std::string bytes = io::encode_safetensors(in);
  std::vector<io::SafetensorsEntry> entries = io::parse_safetensors(bytes, "rt.st");
  REQUIRE(entries.size() == in.size());
  uint64_t covered = 0;
  for (const io::SafetensorsEntry& e : entries) {
    INFO(e.name);
    CHECK(e.begin == covered);  // ordered by offset, tiling the data
    covered = e.end;
    const HostTensor& want = in.at(e.name);
    CHECK(e.dtype == want.dtype);
    CHECK(e.shape == want.dims);
    HostTensor got = io::decode_tensor(bytes, e);
    CHECK(got.data == want.data);
  }
  CHECK(covered == io::safetensors_data(bytes).size());
  CHECK((bytes.size() - io::safetensors_data(bytes).size()) % 8 == 0);  // data 8-byte aligned
}

TEST_CASE("safetensors: a file with metadata, padding and handwritten offsets is read",
          "[safetensors]") {
  float v[3] = {1.5f, -2.0f, 4.0f};
  std::string data(reinterpret_cast<const char*>(v), sizeof v);
  std::string bytes = file(
      R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}}   )",
      data);
  auto entries = io::parse_safetensors(bytes, "m.st");
  REQUIRE(entries.size() == 1);
  CHECK(io::decode_tensor(bytes, entries[0]).data == std::vector<double>{1.5, -2.0, 4.0});
}

TEST_CASE("safetensors: a file shorter than the header length field", "[safetensors][errors]") {
  CHECK_THAT(parse_error(""), Catch::Contains("fewer than the 8-byte header length"));
  CHECK_THAT(parse_error("\x10\0\0"), Catch::Contains("fewer than the 8-byte header length"));
}

TEST_CASE("safetensors: a header length past the end of the file (truncated header)",
          "[safetensors][errors]") {
  std::string bytes = file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  CHECK_THAT(parse_error(bytes.substr(0, 20)), Catch::Contains("runs past the end of the file"));
  CHECK_THAT(parse_error(le64(~uint64_t{0}) + "{}"), Catch::Contains("over the 100 MiB limit"));
  CHECK_THAT(parse_error(le64(uint64_t{200} << 20) + "{}"), Catch::Contains("limit"));
}

TEST_CASE("safetensors: a header that is not JSON, or not an object", "[safetensors][errors]") {
  CHECK_THAT(parse_error(file("{\"w\": ")), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error(file("{\"w\":1}}")), Catch::Contains("not valid JSON"));
  CHECK_THAT(parse_error(file("[1, 2]")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(parse_error(file("")), Catch::Contains("does not start with '{'"));
  CHECK_THAT(parse_error(file("{\"w\":\"\xff\"}")), Catch::Contains("not valid JSON"));
}

TEST_CASE("safetensors: a key given twice", "[safetensors][errors]") {
  CHECK_THAT(parse_error(file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                              R"("w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})")),
             Catch::Contains("the key 'w' twice"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","dtype":"F16","shape":[0],"data_offsets":[0,0])", 0)),
             Catch::Contains("'dtype' twice"));
}

TEST_CASE("safetensors: unknown and unsupported dtypes", "[safetensors][errors]") {
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F33","shape":[1],"data_offsets":[0,4])", 4)),
             Catch::Contains("tensor 'w': unknown dtype 'F33'"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"I64","shape":[1],"data_offsets":[0,8])", 8)),
             Catch::Contains("tensor 'w': dtype I64 is not one mlpc takes (F32, F16, BF16, F64)"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":7,"shape":[1],"data_offsets":[0,4])", 4)),
             Catch::Contains("\"dtype\" is not a string"));
}

TEST_CASE("safetensors: bad shapes", "[safetensors][errors]") {
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":3,"data_offsets":[0,12])", 12)),
             Catch::Contains("\"shape\" is not a list"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[-3],"data_offsets":[0,12])", 12)),
             Catch::Contains("not an integer"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1.5],"data_offsets":[0,4])", 4)),
             Catch::Contains("not an integer"));
  // Each dim allowed, their product is not: refused, not wrapped around.
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1099511627776,1099511627776],)"
                                    R"("data_offsets":[0,0])", 0)),
             Catch::Contains("more elements than fit in 64 bits"));
}

TEST_CASE("safetensors: a shape that does not match its offsets", "[safetensors][errors]") {
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[2,3],"data_offsets":[0,20])", 20)),
             Catch::Contains("tensor 'w': shape [2, 3] in F32 takes 24 bytes but data_offsets [0, 20] hold 20"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"BF16","shape":[3],"data_offsets":[0,12])", 12)),
             Catch::Contains("takes 6 bytes"));
}

TEST_CASE("safetensors: bad or out-of-range offsets", "[safetensors][errors]") {
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])", 2)),
             Catch::Contains("run past the end of the data section (2 bytes)"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[8,4])", 8)),
             Catch::Contains("end before they begin"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0])", 4)),
             Catch::Contains("is not [BEGIN, END]"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[-4,0])", 4)),
             Catch::Contains("is not [BEGIN, END]"));
  CHECK_THAT(parse_error(one_tensor(
                 R"("dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551616])", 4)),
             Catch::Contains("is not [BEGIN, END]"));
  CHECK_THAT(parse_error(one_tensor(
                 R"("dtype":"F32","shape":[1],"data_offsets":[18446744073709551611,18446744073709551615])", 4)),
             Catch::Contains("run past the end"));
}

TEST_CASE("safetensors: overlapping tensors, gaps and trailing bytes", "[safetensors][errors]") {
  CHECK_THAT(parse_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                              std::string(12, '\0'))),
             Catch::Contains("tensor 'b': data_offsets [4, 12] overlap those of tensor 'a' [0, 8]"));
  CHECK_THAT(parse_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                              std::string(8, '\0'))),
             Catch::Contains("overlap"));
  CHECK_THAT(parse_error(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                              R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                              std::string(12, '\0'))),
             Catch::Contains("bytes [4, 8) of the data section belong to no tensor"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4])", 9)),
             Catch::Contains("bytes [4, 9) of the data section belong to no tensor"));
}

TEST_CASE("safetensors: malformed entries and metadata", "[safetensors][errors]") {
  CHECK_THAT(parse_error(file(R"({"w":[1,2]})")), Catch::Contains("tensor 'w': is not an object"));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1])", 4)),
             Catch::Contains("has no \"data_offsets\""));
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1)", 4)),
             Catch::Contains("unknown field 'x'"));
  CHECK_THAT(parse_error(file(R"({"":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})")),
             Catch::Contains("empty name"));
  CHECK_THAT(parse_error(file(R"({"__metadata__":[]})")), Catch::Contains("\"__metadata__\" is not an object"));
  CHECK_THAT(parse_error(file(R"({"__metadata__":{"k":1}})")), Catch::Contains("entry 'k' is not a string"));
  // A name with a newline stays on one line in the message.
  CHECK_THAT(parse_error(file("{\"a\\nb\":{\"dtype\":\"F33\",\"shape\":[0],\"data_offsets\":[0,0]}}")),
             Catch::Contains("tensor 'a\\x0ab'"));
}

TEST_CASE("weights: a file binds every param of the graph by name", "[safetensors][weights]") {
  ir::Graph g = ir::parse(kGraph, "lin.mlp");
  io::NamedTensors values;
  io::bind_weights(g, io::encode_safetensors(lin_weights()), "w.st", values);
  CHECK(values.at("fc.weight").data == lin_weights().at("fc.weight").data);
  CHECK(values.at("fc.bias").data == std::vector<double>{10, -20});
  CHECK(values.at("fc.bias").dtype == ir::DType::F32);
}

TEST_CASE("weights: another dtype in the file is converted to the param's", "[safetensors][weights]") {
  // f32 in the file, bf16 in the graph: rounded to nearest even, as torch's .to() does.
  ir::Graph g = ir::parse(kGraph, "lin.mlp");
  for (ir::Node& n : g.nodes) n.type.dtype = ir::DType::BF16;
  io::NamedTensors w = lin_weights();
  w.at("fc.weight").data[0] = 1.00390625;  // 1 + 2^-8: a tie, rounds to even (1.0) in bf16
  w.at("fc.weight").data[1] = 1.01171875;  // 1 + 3*2^-8: a tie, rounds up to 1 + 2^-6
  io::NamedTensors values;
  io::bind_weights(g, io::encode_safetensors(w), "w.st", values);
  CHECK(values.at("fc.weight").dtype == ir::DType::BF16);
  CHECK(values.at("fc.weight").data[0] == 1.0);
  CHECK(values.at("fc.weight").data[1] == 1.015625);
}

TEST_CASE("weights: a value that overflows the param's dtype is refused", "[safetensors][weights][errors]") {
  ir::Graph g = ir::parse(kGraph, "lin.mlp");
  for (ir::Node& n : g.nodes) n.type.dtype = ir::DType::F16;
  io::NamedTensors w = lin_weights();
  w.at("fc.bias").data[1] = 1e5;
  CHECK_THAT(bind_error(g, io::encode_safetensors(w)),
             Catch::Contains("tensor 'fc.bias': element 1 (100000) does not fit in f16"));
}

TEST_CASE("weights: a missing tensor is named", "[safetensors][weights][errors]") {
  io::NamedTensors w = lin_weights();
  w.erase("fc.bias");
  CHECK_THAT(bind_error(ir::parse(kGraph, "lin.mlp"), io::encode_safetensors(w)),
             Catch::Contains("no tensor 'fc.bias' for param %fc.bias (f32[2]) of @lin"));
}

TEST_CASE("weights: a tensor whose shape is not the param's", "[safetensors][weights][errors]") {
  io::NamedTensors w = lin_weights();
  w.at("fc.weight").dims = {3, 2};  // transposed: the Conv1D layout, not nn.Linear's
  CHECK_THAT(bind_error(ir::parse(kGraph, "lin.mlp"), io::encode_safetensors(w)),
             Catch::Contains("tensor 'fc.weight' has shape [3, 2] but param %fc.weight of @lin is f32[2, 3]"));
}

TEST_CASE("weights: a tensor that is no param of the graph", "[safetensors][weights][errors]") {
  io::NamedTensors w = lin_weights();
  w["fc2.weight"] = {ir::DType::F32, {1}, {0}};
  CHECK_THAT(bind_error(ir::parse(kGraph, "lin.mlp"), io::encode_safetensors(w)),
             Catch::Contains("tensor 'fc2.weight' is not a param of @lin"));
}

TEST_CASE("weights: a bad file is reported before any binding", "[safetensors][weights][errors]") {
  std::string bytes = io::encode_safetensors(lin_weights());
  CHECK_THAT(bind_error(ir::parse(kGraph, "lin.mlp"), bytes.substr(0, bytes.size() - 1)),
             Catch::Contains("tensor 'fc.weight': data_offsets [8, 32] run past the end"));
}

TEST_CASE("weights: save then load through a file gives the same params", "[safetensors][weights]") {
  test::ScratchDir dir;
  ir::Graph g = ir::parse(kGraph, "lin.mlp");
  io::NamedTensors values;
  for (ir::NodeId id : g.params()) values[g.node(id).name] = runtime::random_param(g, id, 7);
  values["x"] = runtime::random_input(g, g.inputs()[0], 4, 7);  // not a param: not saved
  std::string path = (dir.path / "w.safetensors").string();
  io::save_weights(g, values, path);
  io::NamedTensors loaded;
  io::load_weights(g, path, loaded);
  CHECK(loaded.size() == 2);
  CHECK(loaded.at("fc.weight").data == values.at("fc.weight").data);
  CHECK(loaded.at("fc.bias").data == values.at("fc.bias").data);
}

TEST_CASE("files: unreadable paths are one clear error", "[safetensors][errors]") {
  test::ScratchDir dir;
  auto error_of = [](const std::string& path) -> std::string {
    try {
      io::read_file_bytes(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  CHECK_THAT(error_of((dir.path / "nope.st").string()), Catch::Contains("nope.st: error: cannot read: no such file"));
  CHECK_THAT(error_of(dir.path.string()), Catch::Contains("not a regular file"));
  std::string big = (dir.path / "big").string();
  std::ofstream(big) << "0123456789";
  CHECK_THAT(([&] {
               try {
                 io::read_file_bytes(big, 4);
               } catch (const Error& e) {
                 return std::string(e.what());
               }
               return std::string();
             }()),
             Catch::Contains("has 10 bytes, more than the 4"));
  CHECK(io::read_file_bytes(big) == "0123456789");
}

TEST_CASE("safetensors: F64 tensors are read as doubles, F32-typed", "[safetensors]") {
  const double values[2] = {0.1, -3.0e300};
  std::string bytes = one_tensor(R"("dtype":"F64","shape":[2],"data_offsets":[0,16])", 16);
  std::memcpy(bytes.data() + bytes.size() - 16, values, 16);
  std::vector<mlpc::io::SafetensorsEntry> entries = mlpc::io::parse_safetensors(bytes, "w.st");
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].f64);
  CHECK(mlpc::io::stored_itemsize(entries[0]) == 8);
  mlpc::runtime::HostTensor t = mlpc::io::decode_tensor(bytes, entries[0]);
  CHECK(t.dtype == mlpc::ir::DType::F32);
  CHECK(t.data == std::vector<double>{0.1, -3.0e300});  // exact: rounding is binding's
  CHECK_THAT(parse_error(one_tensor(R"("dtype":"F64","shape":[2],"data_offsets":[0,8])", 8)),
             Catch::Contains("shape [2] in F64 takes 16 bytes but data_offsets [0, 8] hold 8"));
}
