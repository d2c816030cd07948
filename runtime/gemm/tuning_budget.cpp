#include "runtime/gemm/tuning_budget.h"

#include <algorithm>
#include <cmath>

namespace mlpc::runtime {
namespace {

// A round count no tuning reaches (rounds double the close candidates' launches up to
// kTuneMaxSamples): the loop's guard against a policy bug, not a limit that shapes tuning.
constexpr int kMaxRounds = 64;

// What one more launch of `c` is expected to cost.
double estimate_us(const TunedCandidate& c) {
  return std::max(c.us.empty() ? c.warmup_us : median_us(c.us), 0.0);
}

int missing(int want, const TunedCandidate& c) {
  return std::max(0, want - static_cast<int>(c.us.size()));
}

}  // namespace

double median_us(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  if (v.size() % 2) return v[mid];
  const double upper = v[mid];
  return 0.5 * (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper);
}

bool warmup_is_sample(double gpu_us, double enqueue_us, bool queued_behind) {
  if (!(gpu_us > 0)) return false;
  return queued_behind || enqueue_us <= kCleanWarmupShare * gpu_us;
}

std::optional<size_t> fastest_candidate(const std::vector<TunedCandidate>& c) {
  std::optional<size_t> best;
  double best_us = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].live() || c[i].us.empty()) continue;
    const double us = median_us(c[i].us);
    if (!best || us < best_us) best = i, best_us = us;
  }
  return best;
}

std::vector<int> next_tuning_round(std::vector<TunedCandidate>& c, double spent_us,
                                   const TuningBudget& b) {
  std::vector<int> round(c.size(), 0);
  std::vector<size_t> live;
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].live()) live.push_back(i);
  if (live.empty()) return round;

  // Cheap: before anything was dropped, every live candidate to max_samples fits the budget, so
  // all of them get exactly that (what tuning always did). Once candidates are dropped, the
  // survivors get no more than the steps below give them.
  double full_us = 0;
  for (size_t i : live) full_us += missing(b.max_samples, c[i]) * estimate_us(c[i]);
  const bool any_dropped =
      std::any_of(c.begin(), c.end(), [](const TunedCandidate& x) { return x.dropped; });
  if (!any_dropped && spent_us + full_us <= b.budget_us) {
    for (size_t i : live) round[i] = missing(b.max_samples, c[i]);
    return round;
  }

  // Probe: one timed launch for each candidate whose warm-up did not count.
  bool probe = false;
  for (size_t i : live)
    if (c[i].us.empty()) round[i] = 1, probe = true;
  if (probe) return round;

  // Drop the clearly slower, and those whose every launch so far was slower than the best's
  // median once both have min_samples (the order is settled).
  const size_t best = *fastest_candidate(c);
  const double best_us = median_us(c[best].us);
  const bool best_settled = static_cast<int>(c[best].us.size()) >= b.min_samples;
  std::vector<size_t> close;
  bool confirm = false;
  for (size_t i : live) {
    if (i == best) continue;
    const double fastest = *std::min_element(c[i].us.begin(), c[i].us.end());
    const bool settled = best_settled && static_cast<int>(c[i].us.size()) >= b.min_samples &&
                         fastest > best_us;
    if (fastest <= best_us * (1 + b.drop_margin) && !settled)
      close.push_back(i);
    else if (c[i].after_idle && c[i].us.size() == 1)
      round[i] = 1, confirm = true;
    else
      c[i].dropped = true;
  }
  if (confirm) return round;
  const int best_missing = missing(b.min_samples, c[best]);
  if (close.empty()) {  // a clear winner: its median of min_samples, no more
    round[best] = best_missing;
    return round;
  }

  // A tie: every survivor timed min_samples times and within tie_share of the best.
  bool tie = best_missing == 0;
  for (size_t i : close)
    tie = tie && static_cast<int>(c[i].us.size()) >= b.min_samples &&
          median_us(c[i].us) <= best_us * (1 + b.tie_share);
  if (tie) return round;

  // The close ones (best first, then by median) want min_samples, then to double their
  // launches; they take one launch at a time in turn while the budget lasts. Once it is spent,
  // the best still reaches min_samples.
  std::sort(close.begin(), close.end(),
            [&](size_t x, size_t y) { return median_us(c[x].us) < median_us(c[y].us); });
  close.insert(close.begin(), best);
  std::vector<int> want(close.size());
  for (size_t j = 0; j < close.size(); ++j) {
    const int have = static_cast<int>(c[close[j]].us.size());
    want[j] = std::max(0, std::max(b.min_samples - have,
                                   std::min(b.max_samples - have, std::max(1, have))));
  }
  double left_us = b.budget_us - spent_us;
  bool granted = false;
  for (bool more = true; more;) {
    more = false;
    for (size_t j = 0; j < close.size(); ++j) {
      const size_t i = close[j];
      const double each = estimate_us(c[i]);
      if (round[i] >= want[j] || each > left_us) continue;
      ++round[i];
      left_us -= each;
      more = granted = true;
    }
  }
  if (!granted) round[best] = best_missing;
  return round;
}

TuningOutcome run_tuning(const WarmUp& warm_up, const TimedRound& timed, const TuningBudget& b) {
  TuningOutcome o;
  const std::vector<WarmupLaunch> warm = warm_up();
  o.candidates.resize(warm.size());
  for (size_t i = 0; i < warm.size(); ++i) {
    TunedCandidate& c = o.candidates[i];
    c.failed = !warm[i].ok;
    if (c.failed) continue;
    c.warmup_us = warm[i].gpu_us;
    c.after_idle = o.launches == 0 && warm[i].sample;  // the first launch of the pass
    ++o.launches;
    o.gpu_us += warm[i].gpu_us;
    if (warm[i].sample) c.us.push_back(warm[i].gpu_us);
  }
  for (int r = 0; r < kMaxRounds; ++r) {
    const std::vector<int> round = next_tuning_round(o.candidates, o.gpu_us, b);
    if (std::all_of(round.begin(), round.end(), [](int n) { return n == 0; })) break;
    const std::vector<std::optional<std::vector<double>>> times = timed(round);
    for (size_t i = 0; i < round.size() && i < times.size(); ++i) {
      if (round[i] == 0) continue;
      TunedCandidate& c = o.candidates[i];
      if (!times[i]) {  // a launch failed: the candidate is out, as one that never launched
        c.failed = true;
        continue;
      }
      for (double us : *times[i]) {
        c.us.push_back(us);
        o.gpu_us += us;
        ++o.launches;
      }
    }
  }
  o.best = fastest_candidate(o.candidates);
  if (o.best) o.us = median_us(o.candidates[*o.best].us);
  return o;
}

}  // namespace mlpc::runtime
