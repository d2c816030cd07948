// Helpers for golden tests on printed IR (parse the input text, run a pass, print the result)
// and on other printed text (logs, reports).
#pragma once

#include <string>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace mlpc::test {

// Runs `pass` (bool(ir::Graph&)) on the parsed `text`; returns the printed IR, verified.
template <typename Pass>
std::string after(const std::string& text, Pass&& pass, bool* changed = nullptr) {
  ir::Graph g = ir::parse(text, "test.mlp");
  bool c = pass(g);
  if (changed) *changed = c;
  ir::verify(g);
  return ir::print(g);
}

// Drops leading indentation common to all lines, so expected IR can be indented in the test.
std::string dedent(const std::string& s);

// How many times `what` occurs in `text` (overlapping occurrences counted).
int count(const std::string& text, const std::string& what);

}  // namespace mlpc::test
