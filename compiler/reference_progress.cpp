#include "compiler/reference_progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "ir/op.h"

namespace mlpc {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool wanted() {
  if (const char* v = std::getenv("MLPC_PROGRESS")) return std::strcmp(v, "1") == 0;
  return isatty(STDERR_FILENO) == 1;
}

}  // namespace

TerminalProgress::TerminalProgress(std::string label, double after_s)
    : label_(std::move(label)), after_s_(after_s), enabled_(wanted()), start_s_(now_s()) {}

TerminalProgress::~TerminalProgress() {
  if (shown_) std::fprintf(stderr, "\r\033[K");
}

runtime::ReferenceProgress TerminalProgress::callback() {
  if (!enabled_) return {};
  return [this](size_t done, size_t total, const ir::Node& next) {
    const double elapsed = now_s() - start_s_;
    if (elapsed < after_s_) return;
    shown_ = true;
    const std::string line =
        fmt::format("{}: {}/{} ops, {:.1f} s, now %{} ({})", label_, done, total, elapsed,
                    next.name, ir::op_name(next.op));
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    std::fflush(stderr);
  };
}

}  // namespace mlpc
