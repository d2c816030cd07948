// The .npy reader and writer (io/npy.h) and binding arrays to graph inputs (io/bind.h): files
// NumPy wrote (tests/data/numpy_*.npy, NumPy 1.24), round trips, and one error test per kind of
// bad file.
#include <catch2/catch.hpp>

#include <cstring>

#include "io/bind.h"
#include "io/file_bytes.h"
#include "io/npy.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "scratch_dir.h"

using namespace mlpc;
using runtime::HostTensor;

namespace {

std::string data_file(const std::string& name) {
  return io::read_file_bytes(std::string(MLPC_TEST_DATA_DIR) + "/" + name);
}

// A v1.0 file from its header dict and data (the header padded as NumPy pads it).
std::string npy(std::string dict, const std::string& data, char major = 1) {
  dict += '\n';
  std::string out = std::string("\x93NUMPY", 6) + major + '\0';
  if (major == 1) {
    out += static_cast<char>(dict.size() & 0xff);
    out += static_cast<char>(dict.size() >> 8);
  } else {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  }
  return out + dict + data;
}

std::string floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string parse_error(const std::string& bytes) {
  try {
    io::parse_npy(bytes, "x.npy");
  } catch (const Error& e) {
    std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("x.npy: error: ", 0) == 0);
    CHECK(msg.find('\n') == std::string::npos);
    return msg;
  }
  FAIL("parse_npy accepted a bad file");
  return {};
}

const char* kDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";

const char* kGraph = R"(
func @f(%x: f32[M, 3]) -> f32[M, 3] {
  %y = relu %x : f32[M, 3]
  return %y
})";

}  // namespace

TEST_CASE("npy: files written by NumPy are read (f32, f16, f64)", "[npy]") {
  io::NpyArray a = io::parse_npy(data_file("numpy_f32_2x3.npy"), "numpy_f32_2x3.npy");
  CHECK(a.dtype == io::NpyDType::F32);
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(a.data == std::vector<double>{-0.625, -0.375, -0.125, 0.125, 0.375, 0.625});

  io::NpyArray h = io::parse_npy(data_file("numpy_f16_4.npy"), "numpy_f16_4.npy");
  CHECK(h.dtype == io::NpyDType::F16);
  CHECK(h.shape == std::vector<int64_t>{4});
  CHECK(h.data == std::vector<double>{1.5, -2.0, 65504.0, 0.0009765625});

  io::NpyArray d = io::parse_npy(data_file("numpy_f64_3x2.npy"), "numpy_f64_3x2.npy");
  CHECK(d.dtype == io::NpyDType::F64);
  CHECK(d.shape == std::vector<int64_t>{3, 2});
  CHECK(d.data == std::vector<double>{1.0 / 3, -2.0, 1e-3, 7.25, 0.1, 1e300});
}

TEST_CASE("npy: mlpc writes byte for byte what NumPy writes", "[npy]") {
  HostTensor t{ir::DType::F32, {2, 3}, {-0.625, -0.375, -0.125, 0.125, 0.375, 0.625}};
  CHECK(io::encode_npy(t) == data_file("numpy_f32_2x3.npy"));
  HostTensor h{ir::DType::F16, {4}, {1.5, -2.0, 65504.0, 0.0009765625}};
  CHECK(io::encode_npy(h) == data_file("numpy_f16_4.npy"));
}

TEST_CASE("npy: round trips and bf16 is written as f32 exactly", "[npy]") {
  test::ScratchDir dir;
  HostTensor b{ir::DType::BF16, {2, 2}, {1.0078125, -3.5, 1e30, 0}};
  for (double& v : b.data) v = runtime::round_to(ir::DType::BF16, v);
  std::string path = (dir.path / "b.npy").string();
  io::write_npy(path, b);
  io::NpyArray a = io::read_npy(path);
  CHECK(a.dtype == io::NpyDType::F32);
  CHECK(a.shape == b.dims);
  CHECK(a.data == b.data);
  CHECK((io::read_file_bytes(path).size() - 4 * 4) % 64 == 0);  // data 64-byte aligned
}

TEST_CASE("npy: version 2.0 and 3.0 headers (4-byte length)", "[npy]") {
  for (char major : {2, 3}) {
    io::NpyArray a = io::parse_npy(npy(kDict, floats({1, 2, 3, 4, 5, 6}), major), "x.npy");
    CHECK(a.shape == std::vector<int64_t>{2, 3});
    CHECK(a.data.back() == 6);
  }
  // Keys in any order, a 1-tuple without its comma, no trailing comma, double quotes.
  io::NpyArray a = io::parse_npy(
      npy("{\"shape\": (3), 'fortran_order': False, 'descr': '<f4'}", floats({1, 2, 3})), "x.npy");
  CHECK(a.shape == std::vector<int64_t>{3});
  io::NpyArray s = io::parse_npy(npy("{'descr': '<f4', 'fortran_order': False, 'shape': ()}",
                                     floats({7})),
                                 "x.npy");
  CHECK(s.shape.empty());
  CHECK(s.data == std::vector<double>{7});
}

TEST_CASE("npy: not an npy file, or an unknown version", "[npy][errors]") {
  CHECK_THAT(parse_error(""), Catch::Contains("not a .npy file"));
  CHECK_THAT(parse_error("PK\x03\x04 a zip, maybe an .npz"), Catch::Contains("not a .npy file"));
  std::string v4 = npy(kDict, floats({1, 2, 3, 4, 5, 6}));
  v4[6] = 4;
  CHECK_THAT(parse_error(v4), Catch::Contains("npy version 4.0 is not supported"));
}

TEST_CASE("npy: a truncated header or header length", "[npy][errors]") {
  std::string ok = npy(kDict, floats({1, 2, 3, 4, 5, 6}));
  CHECK_THAT(parse_error(ok.substr(0, 9)), Catch::Contains("ends inside the npy header length"));
  CHECK_THAT(parse_error(ok.substr(0, 40)), Catch::Contains("runs past the end of the file"));
  std::string big = npy(kDict, "", 2);
  big[8] = 0, big[9] = 0, big[10] = 0x10, big[11] = 0;  // 1 MiB
  CHECK_THAT(parse_error(big), Catch::Contains("over the 65536-byte limit"));
}

TEST_CASE("npy: a header dict that does not parse", "[npy][errors]") {
  std::string data = floats({1, 2, 3, 4, 5, 6});
  CHECK_THAT(parse_error(npy("{'descr': '<f4', 'fortran_order': False}", data)),
             Catch::Contains("needs 'descr', 'fortran_order' and 'shape'"));
  CHECK_THAT(parse_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", data)),
             Catch::Contains("unexpected key 'x'"));
  CHECK_THAT(parse_error(npy("{'descr': '<f4', 'fortran_order': Fals, 'shape': (2, 3)}", data)),
             Catch::Contains("expected True or False"));
  CHECK_THAT(parse_error(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", data)),
             Catch::Contains("expected a non-negative integer"));
  CHECK_THAT(parse_error(npy("{'descr': '<f4 , 'fortran_order': False, 'shape': (2, 3)}", data)),
             Catch::Contains("npy header"));
  CHECK_THAT(parse_error(npy(std::string(kDict) + " x", data)), Catch::Contains("text after the closing"));
  CHECK_THAT(parse_error(npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", data)),
             Catch::Contains("the key 'descr' is given twice"));
}

TEST_CASE("npy: unsupported dtypes, byte order and Fortran order", "[npy][errors]") {
  auto with = [](const std::string& descr, const std::string& order = "False") {
    return npy("{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': (2,), }",
               std::string(8, '\0'));
  };
  CHECK_THAT(parse_error(with(">f4")), Catch::Contains("'>f4' is not supported (big-endian data"));
  CHECK_THAT(parse_error(with("<i4")), Catch::Contains("'<i4' is not supported (mlpc reads"));
  CHECK_THAT(parse_error(with("<V2")), Catch::Contains("bfloat16"));
  CHECK_THAT(parse_error(with("<f4", "True")), Catch::Contains("Fortran-order"));
}

TEST_CASE("npy: data that does not match the shape", "[npy][errors]") {
  CHECK_THAT(parse_error(npy(kDict, floats({1, 2, 3, 4, 5}))),
             Catch::Contains("shape (2, 3) in <f4 takes 24 bytes of data, the file has 20"));
  CHECK_THAT(parse_error(npy(kDict, floats({1, 2, 3, 4, 5, 6, 7}))), Catch::Contains("the file has 28"));
  CHECK_THAT(parse_error(npy("{'descr': '<f8', 'fortran_order': False, "
                             "'shape': (1099511627776, 1099511627776)}",
                             "")),
             Catch::Contains("more elements than fit in 64 bits"));
  CHECK_THAT(parse_error(npy("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,)}", "")),
             Catch::Contains("larger than 2^40"));
}

TEST_CASE("inputs: an array binds to an input of the same shape, any batch", "[npy][inputs]") {
  ir::Graph g = ir::parse(kGraph, "f.mlp");
  io::NpyArray a{io::NpyDType::F64, {4, 3}, {0.1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}};
  CHECK(io::batch_of(g, g.inputs()[0], a) == 4);
  HostTensor x = io::input_from_npy(g, g.inputs()[0], a, "x.npy");
  CHECK(x.dims == std::vector<int64_t>{4, 3});
  CHECK(x.data[0] == static_cast<double>(0.1f));  // f64 rounded to the input's f32
}

TEST_CASE("inputs: a shape that is not the input's is named", "[npy][inputs][errors]") {
  ir::Graph g = ir::parse(kGraph, "f.mlp");
  auto error_of = [&](io::NpyArray a) -> std::string {
    try {
      io::input_from_npy(g, g.inputs()[0], a, "x.npy");
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(error_of({io::NpyDType::F32, {4, 2}, std::vector<double>(8)}) ==
        "x.npy: error: the array has shape (4, 2) but input %x of @f is f32[M, 3]");
  CHECK_THAT(error_of({io::NpyDType::F32, {12}, std::vector<double>(12)}), Catch::Contains("shape (12)"));
  CHECK_THAT(error_of({io::NpyDType::F32, {0, 3}, {}}), Catch::Contains("shape (0, 3)"));
  CHECK_THAT(error_of({io::NpyDType::F64, {1, 3}, {1, 2, 1e300}}),
             Catch::Contains("x.npy: error: input %x: element 2 (1e+300) does not fit in f32"));
}
