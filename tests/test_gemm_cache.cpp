// The GEMM tuning cache (runtime/gemm/gemm_tuner.h) without a GPU: keys, the algo encoding, the
// JSON document, and the gemm_algos.json file (round trips, atomic writes, corrupt files).
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "scratch_dir.h"
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/gemm/gemm_tuner.h"
#include "host/scoped_env.h"

namespace fs = std::filesystem;
using namespace mlpc;
using namespace mlpc::runtime;

namespace {

using mlpc::runtime::ScopedEnv;

using mlpc::test::ScratchDir;

// A fresh cache root in MLPC_CACHE_DIR, for one test.
struct FreshRoot {
  ScratchDir tmp;
  ScopedEnv dir{"MLPC_CACHE_DIR", tmp.path.string()};
  fs::path file() const { return tmp.path / GemmAlgoCache::kFileName; }
};

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

GemmKey blog_gemm() {
  return {"sm_90", ir::DType::BF16, 8192, 3072, 768, passes::LtEpilogue::GeluBias, false,
          "13.1.0"};
}

GemmAlgoRecord record(uint64_t seed, double us, int index, int count) {
  GemmAlgoRecord r;
  for (size_t i = 0; i < r.algo.size(); ++i) r.algo[i] = seed * 0x9e3779b97f4a7c15ULL + i;
  r.algo[7] = ~uint64_t{0};  // every bit pattern must survive, the top word's high bit too
  r.us = us;
  r.heuristic_index = index;
  r.candidates = count;
  return r;
}

}  // namespace

TEST_CASE("GEMM tuning keys name every field", "[cache]") {
  const GemmKey base = blog_gemm();
  const std::string key = gemm_tuning_key(base);
  CHECK(key == "sm_90|bf16|8192x3072x768|gelu_bias|res0|cublasLt13.1.0");

  std::vector<GemmKey> variants;
  auto vary = [&](auto&& change) {
    GemmKey k = base;
    change(k);
    variants.push_back(k);
  };
  vary([](GemmKey& k) { k.arch = "sm_80"; });
  vary([](GemmKey& k) { k.dtype = ir::DType::F16; });
  vary([](GemmKey& k) { k.dtype = ir::DType::F32; });
  vary([](GemmKey& k) { k.rows = 16; });
  vary([](GemmKey& k) { k.n = 768; });
  vary([](GemmKey& k) { k.k = 3072; });
  vary([](GemmKey& k) { std::swap(k.n, k.k); });
  vary([](GemmKey& k) { std::swap(k.rows, k.n); });
  vary([](GemmKey& k) { k.epilogue = passes::LtEpilogue::Default; });
  vary([](GemmKey& k) { k.epilogue = passes::LtEpilogue::Bias; });
  vary([](GemmKey& k) { k.epilogue = passes::LtEpilogue::Relu; });
  vary([](GemmKey& k) { k.epilogue = passes::LtEpilogue::ReluBias; });
  vary([](GemmKey& k) { k.epilogue = passes::LtEpilogue::Gelu; });
  vary([](GemmKey& k) { k.residual = true; });
  vary([](GemmKey& k) { k.cublaslt_version = "13.0.2"; });
  vary([](GemmKey& k) { k.x_transposed = true; });
  vary([](GemmKey& k) { k.x_transposed = k.w_transposed = true; });
  std::set<std::string> keys{key};
  for (const GemmKey& k : variants) {
    std::string s = gemm_tuning_key(k);
    INFO(s);
    CHECK(keys.insert(s).second);
  }
  CHECK(gemm_tuning_key(base) == key);  // deterministic
  GemmKey transposed = base;
  transposed.x_transposed = true;
  CHECK(gemm_tuning_key(transposed) == key + "|xT");

  // The library version is the runtime's, "major.minor.patch".
  std::string v = cublaslt_version();
  CHECK(std::count(v.begin(), v.end(), '.') == 2);
}

TEST_CASE("MLPC_GEMM_TUNING=0 turns tuning off", "[cache]") {
  {
    ScopedEnv off("MLPC_GEMM_TUNING", "0");
    CHECK(gemm_tuning_disabled_by_env());
  }
  for (const char* v : {"1", ""}) {
    ScopedEnv on("MLPC_GEMM_TUNING", std::string(v));
    CHECK_FALSE(gemm_tuning_disabled_by_env());
  }
  ScopedEnv unset("MLPC_GEMM_TUNING", std::nullopt);
  CHECK_FALSE(gemm_tuning_disabled_by_env());
}

TEST_CASE("algo words round-trip through hex", "[cache]") {
  GemmAlgoRecord r = record(42, 1, 0, 1);
  std::string hex = algo_to_hex(r.algo);
  CHECK(hex.size() == 128);
  CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(hex.substr(112) == "ffffffffffffffff");
  auto back = algo_from_hex(hex);
  REQUIRE(back);
  CHECK(*back == r.algo);
  std::string upper = hex;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  CHECK(algo_from_hex(upper) == back);
  CHECK_FALSE(algo_from_hex(hex.substr(1)));
  CHECK_FALSE(algo_from_hex(hex + "0"));
  CHECK_FALSE(algo_from_hex(std::string(127, '0') + "g"));
  CHECK_FALSE(algo_from_hex(""));
}

TEST_CASE("GEMM records round-trip through JSON and malformed documents are rejected", "[cache]") {
  GemmAlgoRecords records{{gemm_tuning_key(blog_gemm()), record(1, 48.75, 3, 8)},
                          {"sm_90|f32|64x256x256|relu_bias|res1|cublasLt13.1.0", record(2, 3.5, 0, 1)}};
  nlohmann::json j = gemm_records_to_json(records);
  CHECK(j["format"] == "mlpc-gemm-algos-v1");
  auto back = gemm_records_from_json(nlohmann::json::parse(j.dump()));
  REQUIRE(back);
  CHECK(*back == records);
  CHECK(gemm_records_from_json(gemm_records_to_json({})) == GemmAlgoRecords{});

  const std::string key = gemm_tuning_key(blog_gemm());
  auto broken = [&](auto&& change) {
    nlohmann::json b = j;
    change(b);
    return gemm_records_from_json(b);
  };
  CHECK_FALSE(gemm_records_from_json(nlohmann::json::array()));
  CHECK_FALSE(gemm_records_from_json(nlohmann::json("text")));
  CHECK_FALSE(broken([](auto& b) { b.erase("format"); }));
  CHECK_FALSE(broken([](auto& b) { b["format"] = "mlpc-gemm-algos-v0"; }));
  CHECK_FALSE(broken([](auto& b) { b["entries"] = nlohmann::json::array(); }));
  CHECK_FALSE(broken([](auto& b) { b.erase("entries"); }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key] = 7; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["us"] = "fast"; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["us"] = -1.0; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["heuristic_index"] = 1.5; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["heuristic_index"] = 8; }));  // >= candidates
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["heuristic_index"] = -1; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["candidates"] = 0; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["algo"] = 12345; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key]["algo"] = "00ff"; }));
  CHECK_FALSE(broken([&](auto& b) { b["entries"][key].erase("candidates"); }));
  // Integral microseconds are fine: JSON does not distinguish.
  auto whole = broken([&](auto& b) { b["entries"][key]["us"] = 49; });
  REQUIRE(whole);
  CHECK(whole->at(key).us == 49.0);
}

TEST_CASE("the GEMM cache file round-trips entries through MLPC_CACHE_DIR", "[cache]") {
  FreshRoot root;
  const std::string k1 = gemm_tuning_key(blog_gemm());
  GemmKey other = blog_gemm();
  other.rows = 16;
  const std::string k2 = gemm_tuning_key(other);
  {
    GemmAlgoCache cache;  // cache_dir() = $MLPC_CACHE_DIR
    REQUIRE(cache.enabled());
    CHECK(cache.path() == root.file().string());
    CHECK_FALSE(cache.find(k1));
    CHECK_FALSE(fs::exists(root.file()));  // a miss writes nothing
    cache.store(k1, record(1, 48.8, 3, 8));
    cache.store(k2, record(2, 5.25, 0, 4));
    REQUIRE(cache.find(k1));
    CHECK(*cache.find(k1) == record(1, 48.8, 3, 8));
  }
  CHECK(fs::exists(root.file()));
  // Another instance (another process) reads them from disk.
  GemmAlgoCache again;
  auto r1 = again.find(k1), r2 = again.find(k2);
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(*r1 == record(1, 48.8, 3, 8));
  CHECK(*r2 == record(2, 5.25, 0, 4));
  // Overwriting a key keeps the others.
  again.store(k1, record(3, 40.0, 5, 8));
  GemmAlgoCache third(root.tmp.path.string());
  CHECK(third.find(k1) == record(3, 40.0, 5, 8));
  CHECK(third.find(k2) == record(2, 5.25, 0, 4));
  // The file is plain, readable JSON with the key spelled out.
  nlohmann::json j = nlohmann::json::parse(slurp(root.file()));
  CHECK(j["entries"].contains(k1));
  CHECK(j["entries"][k1]["heuristic_index"] == 5);
}

TEST_CASE("GEMM cache writes merge with entries other processes stored", "[cache]") {
  FreshRoot root;
  GemmAlgoCache a, b;
  CHECK_FALSE(a.find("key-a"));  // both load the (empty) file now
  CHECK_FALSE(b.find("key-b"));
  a.store("key-a", record(1, 1, 0, 1));
  b.store("key-b", record(2, 2, 0, 1));  // b never saw key-a in memory
  GemmAlgoCache c;
  CHECK(c.find("key-a") == record(1, 1, 0, 1));
  CHECK(c.find("key-b") == record(2, 2, 0, 1));
}

TEST_CASE("GEMM cache writes are atomic: no temp files are left behind", "[cache]") {
  FreshRoot root;
  GemmAlgoCache cache;
  for (int i = 0; i < 20; ++i) cache.store("key-" + std::to_string(i), record(i, i + 0.5, 0, 2));
  CHECK(names_in(root.tmp.path) == std::vector<std::string>{GemmAlgoCache::kFileName});
  GemmAlgoCache again;
  for (int i = 0; i < 20; ++i) CHECK(again.find("key-" + std::to_string(i)) == record(i, i + 0.5, 0, 2));
}

TEST_CASE("a corrupt GEMM cache file is ignored, then overwritten cleanly", "[cache]") {
  const std::string good = gemm_records_to_json({{"old-key", record(9, 9, 0, 1)}}).dump();
  auto [what, bytes] = GENERATE_COPY(table<std::string, std::string>({
      {"garbage", std::string("\x7f" "ELF\x01\x02 not json at all \xff\xfe")},
      {"empty", ""},
      {"truncated JSON", good.substr(0, good.size() / 2)},
      {"wrong top-level type", "[1, 2, 3]"},
      {"wrong entries type", R"({"format": "mlpc-gemm-algos-v1", "entries": [1]})"},
      {"wrong field type",
       R"({"format": "mlpc-gemm-algos-v1", "entries": {"k": {"algo": 5, "us": "x", "heuristic_index": 0, "candidates": 1}}})"},
      {"another format", R"({"format": "something-else", "entries": {}})"},
  }));
  INFO(what);
  FreshRoot root;
  spit(root.file(), bytes);
  GemmAlgoCache cache;
  CHECK_NOTHROW(cache.find("old-key"));
  CHECK_FALSE(cache.find("old-key"));  // nothing trusted from a corrupt file
  CHECK(slurp(root.file()) == bytes);  // reading never changes the file

  cache.store("new-key", record(5, 12.5, 1, 3));
  nlohmann::json j = nlohmann::json::parse(slurp(root.file()));  // parses: it was replaced
  auto records = gemm_records_from_json(j);
  REQUIRE(records);
  CHECK(*records == GemmAlgoRecords{{"new-key", record(5, 12.5, 1, 3)}});
  CHECK(names_in(root.tmp.path) == std::vector<std::string>{GemmAlgoCache::kFileName});
}

TEST_CASE("a GEMM cache whose directory cannot be created is disabled, not fatal", "[cache]") {
  ScratchDir tmp;
  spit(tmp.path / "blocker", "a file where a directory should be");
  GemmAlgoCache cache((tmp.path / "blocker" / "sub").string());
  CHECK_FALSE(cache.enabled());
  CHECK_FALSE(cache.find("k"));
  CHECK_NOTHROW(cache.store("k", record(1, 1, 0, 1)));
  CHECK(cache.find("k") == record(1, 1, 0, 1));  // still remembered in memory
}
