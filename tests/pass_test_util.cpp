#include "pass_test_util.h"

#include <sstream>

namespace mlpc::test {

std::string dedent(const std::string& s) {
  std::istringstream in(s);
  std::string line, out;
  size_t indent = std::string::npos;
  std::vector<std::string> lines;
  while (std::getline(in, line)) {
    lines.push_back(line);
    size_t first = line.find_first_not_of(' ');
    if (first != std::string::npos) indent = std::min(indent, first);
  }
  while (!lines.empty() && lines.front().find_first_not_of(' ') == std::string::npos)
    lines.erase(lines.begin());
  for (const std::string& l : lines)
    out += (l.size() >= indent ? l.substr(indent) : std::string()) + "\n";
  while (out.size() >= 2 && out[out.size() - 2] == '\n') out.pop_back();
  return out;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace mlpc::test
