// Golden tests for DCE and CSE.
#include <catch2/catch.hpp>

#include "pass_test_util.h"
#include "passes/cse.h"
#include "passes/dce.h"

using mlpc::test::after;
using mlpc::test::dedent;

TEST_CASE("dce drops what the return does not need, params included", "[dce]") {
  bool changed = false;
  std::string got = after(R"(
func @f(%x: f32[M, 8]) -> f32[M, 8] {
  %w = param f32[8, 8]
  %unused = matmul %x, %w : f32[M, 8]
  %y = relu %x : f32[M, 8]
  return %y
})", mlpc::passes::dce, &changed);
  CHECK(changed);
  CHECK(got == dedent(R"(
    func @f(%x: f32[M, 8]) -> f32[M, 8] {
      %y = relu %x : f32[M, 8]
      return %y
    })"));
}

TEST_CASE("dce keeps unused function inputs: they are the signature", "[dce]") {
  const std::string text = dedent(R"(
    func @f(%x: f32[M, 8], %z: f32[M, 8]) -> f32[M, 8] {
      %y = relu %x : f32[M, 8]
      return %y
    })");
  bool changed = true;
  CHECK(after(text, mlpc::passes::dce, &changed) == text);
  CHECK_FALSE(changed);
}

TEST_CASE("cse merges equal ops and rewires their users", "[cse]") {
  bool changed = false;
  std::string got = after(R"(
func @f(%x: f32[M, 8]) -> f32[M, 8] {
  %w = param f32[8, 8]
  %a = matmul %x, %w : f32[M, 8]
  %b = matmul %x, %w : f32[M, 8]
  %c = scale %a, 2 : f32[M, 8]
  %d = scale %b, 2 : f32[M, 8]
  %e = scale %b, 3 : f32[M, 8]
  %s = add %c, %d : f32[M, 8]
  %t = add %s, %e : f32[M, 8]
  return %t
})", mlpc::passes::cse, &changed);
  CHECK(changed);
  CHECK(got == dedent(R"(
    func @f(%x: f32[M, 8]) -> f32[M, 8] {
      %w = param f32[8, 8]
      %a = matmul %x, %w : f32[M, 8]
      %c = scale %a, 2 : f32[M, 8]
      %e = scale %a, 3 : f32[M, 8]
      %s = add %c, %c : f32[M, 8]
      %t = add %s, %e : f32[M, 8]
      return %t
    })"));
}

TEST_CASE("cse keeps casts to different dtypes apart and never merges params", "[cse]") {
  const std::string text = dedent(R"(
    func @f(%x: f32[M, 8]) -> (f16[M, 8], bf16[M, 8]) {
      %p = param f32[8]
      %q = param f32[8]
      %a = cast %x : f16[M, 8]
      %b = cast %x : bf16[M, 8]
      return %a, %b
    })");
  bool changed = true;
  CHECK(after(text, mlpc::passes::cse, &changed) == text);
  CHECK_FALSE(changed);
}
