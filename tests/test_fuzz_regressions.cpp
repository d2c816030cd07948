// Replays, in the normal test suite, every input the fuzzers once crashed on
// (tests/data/fuzz_regressions/<target>/) and their seed corpora (fuzz/corpus/<target>/) through
// the very checks the fuzz targets run (fuzz/fuzz_checks.h). A fixed bug stays fixed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_checks.h"
#if __has_include("io/safetensors.h")
#include "fuzz/safetensors_check.h"
#define MLPC_HAVE_SAFETENSORS 1
#endif

namespace {

namespace fs = std::filesystem;

const fs::path kRegressions = fs::path(MLPC_TEST_DATA_DIR) / "fuzz_regressions";
const fs::path kCorpora = fs::path(MLPC_SAMPLES_SOURCE_DIR).parent_path() / "fuzz" / "corpus";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every regular file under DIR (sorted, so failures are reproducible); none when it is missing.
std::vector<fs::path> files_in(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().filename() != "README.md") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

size_t replay(const fs::path& dir, const std::function<void(std::string_view)>& check) {
  size_t n = 0;
  for (const fs::path& p : files_in(dir)) {
    INFO("input " << p.string());
    std::string bytes = slurp(p);
    CHECK_NOTHROW(check(bytes));
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("fuzz_parser crash inputs and seeds pass the round-trip check", "[fuzz]") {
  replay(kRegressions / "parser", mlpc::fuzz::check_parser);
  // The seed corpus exists: an empty replay would prove nothing.
  CHECK(replay(kCorpora / "parser", mlpc::fuzz::check_parser) >= 10);
}

TEST_CASE("fuzz_pipeline crash inputs and seeds go through passes and codegen", "[fuzz]") {
  replay(kRegressions / "pipeline", mlpc::fuzz::check_pipeline);
  CHECK(replay(kCorpora / "pipeline", mlpc::fuzz::check_pipeline) >= 5);
}

#ifdef MLPC_HAVE_SAFETENSORS
TEST_CASE("fuzz_safetensors crash inputs and seeds are parsed or cleanly rejected", "[fuzz]") {
  replay(kRegressions / "safetensors", mlpc::fuzz::check_safetensors);
  CHECK(replay(kCorpora / "safetensors", mlpc::fuzz::check_safetensors) >= 3);
}
#endif

// The checks can fail: a property violation is reported, not swallowed.
TEST_CASE("fuzz checks reject a broken property", "[fuzz]") {
  mlpc::Error multi_line("fuzz.mlp:1:1: error: one\ntwo");
  CHECK_THROWS_AS(mlpc::fuzz::check_rejection(multi_line, mlpc::fuzz::kFuzzFile), std::logic_error);
  mlpc::Error unplaced("something failed");
  CHECK_THROWS_AS(mlpc::fuzz::check_rejection(unplaced, mlpc::fuzz::kFuzzFile), std::logic_error);
  CHECK_NOTHROW(mlpc::fuzz::check_rejection(mlpc::Error("fuzz.mlp:2:3: error: x"),
                                            mlpc::fuzz::kFuzzFile));
}
