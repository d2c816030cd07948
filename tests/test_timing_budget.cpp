// The GPU time budgets of GEMM tuning (runtime/gemm/tuning_budget.h) and of timing replays
// (runtime/measure/replay_budget.h), driven with synthetic timings: no GPU.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "runtime/gemm/gemm_tuner.h"
#include "runtime/gemm/tuning_budget.h"
#include "runtime/measure/replay_budget.h"

using namespace mlpc::runtime;

namespace {

// What tuning cost before budgets: every candidate 2 warm-ups and 15 timed launches.
constexpr int kLaunchesBefore = 2 + 15;

// A stand-in for the GPU: candidate i's launches take base_us[i] (negative: it fails to
// launch), each off by a deterministic jitter within +-spread of it. A launch is enqueued in
// kEnqueueUs; a warm-up is queued behind the one before when that one runs longer than that.
struct FakeGpu {
  static constexpr double kEnqueueUs = 10;
  std::vector<double> base_us;
  double spread = 0.002;
  uint32_t state = 12345;
  std::vector<int> launches = std::vector<int>(base_us.size(), 0);

  double jitter() {
    state = state * 1664525u + 1013904223u;
    return ((state >> 8) / double(1 << 24) * 2 - 1) * spread;
  }
  double launch(size_t i) {
    ++launches[i];
    return base_us[i] * (1 + jitter());
  }
  std::vector<WarmupLaunch> warm_up() {
    std::vector<WarmupLaunch> out(base_us.size());
    std::optional<double> previous_us;
    for (size_t i = 0; i < base_us.size(); ++i) {
      if (base_us[i] < 0) continue;
      const double us = launch(i);
      out[i] = {true, us, warmup_is_sample(us, kEnqueueUs, previous_us && *previous_us > kEnqueueUs)};
      previous_us = us;
    }
    return out;
  }
  std::vector<std::optional<std::vector<double>>> timed(const std::vector<int>& round) {
    std::vector<std::optional<std::vector<double>>> out(round.size());
    for (size_t i = 0; i < round.size(); ++i) {
      if (round[i] == 0) continue;
      REQUIRE(round[i] > 0);
      if (base_us[i] < 0) continue;  // failed
      out[i].emplace();
      for (int r = 0; r < round[i]; ++r) out[i]->push_back(launch(i));
    }
    return out;
  }
  TuningOutcome tune(const TuningBudget& b = {}) {
    return run_tuning([this] { return warm_up(); },
                      [this](const std::vector<int>& round) { return timed(round); }, b);
  }
  size_t fastest() const {
    return static_cast<size_t>(std::min_element(base_us.begin(), base_us.end(),
                                                [](double a, double b) {
                                                  return (a < 0 ? 1e30 : a) < (b < 0 ? 1e30 : b);
                                                }) -
                               base_us.begin());
  }
};

FakeGpu gpu(std::vector<double> base_us, double spread = 0.002) {
  FakeGpu g{base_us, spread};
  g.launches.assign(base_us.size(), 0);
  return g;
}

size_t samples(const TuningOutcome& o, size_t i) { return o.candidates[i].us.size(); }

}  // namespace

TEST_CASE("median_us and warmup_is_sample", "[timing_budget]") {
  CHECK(median_us({}) == 0);
  CHECK(median_us({3}) == 3);
  CHECK(median_us({5, 1, 3}) == 3);
  CHECK(median_us({4, 1, 3, 2}) == 2.5);
  CHECK(median_us({7, 7, 1, 100}) == 7);

  // Queued behind a launch still running: the GPU never waited for it, even after a module load.
  CHECK(warmup_is_sample(5000, 3000, /*queued_behind=*/true));
  // Not queued behind: only when its host call was a negligible share of its time.
  CHECK(warmup_is_sample(5000, 10, false));
  CHECK_FALSE(warmup_is_sample(5000, 400, false));
  CHECK_FALSE(warmup_is_sample(5, 10, false));
  CHECK_FALSE(warmup_is_sample(0, 0, true));
}

TEST_CASE("a 5 ms GEMM with 8 candidates is tuned within its budget", "[timing_budget]") {
  // Today's cost: 8 x 17 launches of ~5.7 ms, ~0.8 s of GPU time.
  FakeGpu g = gpu({5000, 5300, 5600, 5900, 6200, 5500, 5800, 6100});
  const TuningOutcome o = g.tune();
  REQUIRE(o.best);
  CHECK(*o.best == 0);
  CHECK(o.gpu_us <= kTuneBudgetUs);
  CHECK(o.launches < kLaunchesBefore);  // fewer than each candidate took before
  CHECK(samples(o, 0) >= static_cast<size_t>(kTuneMinSamples));
  CHECK(o.us == Approx(5000).epsilon(0.01));
  CHECK(o.launches == std::accumulate(g.launches.begin(), g.launches.end(), 0));
  for (size_t i = 1; i < 8; ++i) CHECK(o.candidates[i].dropped);

  SECTION("the fastest need not be cuBLASLt's first guess") {
    FakeGpu h = gpu({5400, 5300, 5600, 5000, 6200, 5500, 5800, 6100});
    const TuningOutcome p = h.tune();
    REQUIRE(p.best);
    CHECK(*p.best == 3);
    CHECK(samples(p, 3) >= static_cast<size_t>(kTuneMinSamples));
    // One launch each, the first one again (its one time came from an idle GPU), two more for
    // the winner: the floor, a little past the budget here.
    CHECK(p.launches == 8 + 1 + 2);
  }
}

TEST_CASE("a 5 us GEMM keeps today's sample count", "[timing_budget]") {
  CHECK(GemmTuner::kTimed == 15);  // what each candidate was timed before budgets
  FakeGpu g = gpu({5.0, 5.5, 6.0, 7.0, 9.0, 12.0, 5.2, 8.0}, 0.05);
  const TuningOutcome o = g.tune();
  REQUIRE(o.best);
  CHECK(*o.best == 0);
  for (size_t i = 0; i < 8; ++i) {
    CHECK(samples(o, i) >= static_cast<size_t>(GemmTuner::kTimed));
    CHECK_FALSE(o.candidates[i].dropped);  // nothing is dropped when everything is cheap
  }
  CHECK(o.gpu_us < 1000);
}

TEST_CASE("GEMMs of up to a few hundred us are timed as before", "[timing_budget]") {
  FakeGpu g = gpu({300, 310, 330, 400, 500, 305, 350, 320});
  const TuningOutcome o = g.tune();
  REQUIRE(o.best);
  CHECK(*o.best == 0);
  for (size_t i = 0; i < 8; ++i) CHECK(samples(o, i) >= static_cast<size_t>(kTuneMaxSamples));
  CHECK(o.gpu_us <= kTuneBudgetUs);
}

TEST_CASE("a clear winner is kept, and the others are launched once", "[timing_budget]") {
  FakeGpu g = gpu({1500, 1400, 1600, 1700, 2000, 1550, 1480, 1900});
  const TuningOutcome o = g.tune();
  REQUIRE(o.best);
  CHECK(*o.best == 1);
  CHECK(samples(o, 1) == static_cast<size_t>(kTuneMinSamples));
  for (size_t i : {2, 3, 4, 5, 6, 7}) {
    CHECK(o.candidates[i].dropped);
    CHECK(g.launches[i] == 1);
  }
  // Its one time came from the pass's first launch, on an idle GPU: timed again before it went.
  CHECK(g.launches[0] == 2);
  CHECK(o.candidates[0].dropped);
  CHECK(o.gpu_us <= kTuneBudgetUs);
}

TEST_CASE("the first warm-up's time alone drops no candidate", "[timing_budget]") {
  // cuBLASLt's first guess is the fastest, but its warm-up (the pass's first launch) ran slow.
  FakeGpu g = gpu({1400, 1420, 1600, 1700, 2000, 1550, 1480, 1900});
  std::vector<WarmupLaunch> warm = g.warm_up();
  warm[0].gpu_us = 1500;
  const TuningOutcome o = run_tuning(
      [&] { return warm; }, [&](const std::vector<int>& round) { return g.timed(round); });
  REQUIRE(o.best);
  CHECK(*o.best == 0);
  CHECK_FALSE(o.candidates[0].dropped);
}

TEST_CASE("a close pair gets more samples than the clearly slower", "[timing_budget]") {
  SECTION("0.7% apart with little spread: timed until the order is settled") {
    FakeGpu g = gpu({1400, 1410, 1600, 1700, 2000, 1550, 1650, 1900}, 0.001);
    const TuningOutcome o = g.tune();
    REQUIRE(o.best);
    CHECK(*o.best == 0);
    CHECK(samples(o, 1) >= static_cast<size_t>(kTuneMinSamples));
    for (size_t i : {2, 3, 4, 5, 6, 7}) CHECK(g.launches[i] == 1);
    CHECK(o.gpu_us <= kTuneBudgetUs);
  }
  SECTION("1.4% apart, each launch off by up to 2%: more launches, within the budget") {
    FakeGpu g = gpu({1400, 1420, 1600, 1700, 2000, 1550, 1650, 1900}, 0.02);
    const TuningOutcome o = g.tune();
    REQUIRE(o.best);
    CHECK(samples(o, 0) >= static_cast<size_t>(kTuneMinSamples));
    CHECK(samples(o, 1) >= static_cast<size_t>(kTuneMinSamples));
    CHECK(o.gpu_us <= kTuneBudgetUs);
    for (size_t i : {2, 3, 4, 6, 7}) CHECK(g.launches[i] == 1);
  }
  SECTION("overlapping times after the minimum: both double their launches") {
    std::vector<TunedCandidate> c(3);
    c[0].us = {1400, 1425, 1390};
    c[1].us = {1410, 1440, 1395};
    c[2].us = {1600};
    for (TunedCandidate& x : c) x.warmup_us = x.us.front();
    CHECK(next_tuning_round(c, 20'000) == std::vector<int>{3, 3, 0});
    CHECK(c[2].dropped);
    CHECK_FALSE(c[1].dropped);
  }
  SECTION("a 5 ms pair: the budget left after one launch each goes to the pair") {
    FakeGpu g = gpu({5000, 5050, 5600, 5900, 6200, 5500, 5800, 6100}, 0.001);
    const TuningOutcome o = g.tune();
    REQUIRE(o.best);
    CHECK(*o.best == 0);
    CHECK(samples(o, 1) >= 2);
    for (size_t i : {2, 3, 4, 5, 6, 7}) CHECK(g.launches[i] == 1);
  }
}

TEST_CASE("a noise-level tie stops at the minimum", "[timing_budget]") {
  FakeGpu g = gpu({1400, 1401, 1600, 1700, 2000, 1550, 1650, 1900}, 0.001);
  const TuningOutcome o = g.tune();
  REQUIRE(o.best);
  CHECK((*o.best == 0 || *o.best == 1));
  CHECK(samples(o, 0) == static_cast<size_t>(kTuneMinSamples));
  CHECK(samples(o, 1) == static_cast<size_t>(kTuneMinSamples));
}

TEST_CASE("long GEMMs cost their floor: one launch each and the winner's minimum",
          "[timing_budget]") {
  FakeGpu g = gpu({20000, 25000, 26000, 27000, 28000, 29000, 30000, 31000});
  const TuningOutcome o = g.tune();
  REQUIRE(o.best);
  CHECK(*o.best == 0);
  // 8 warm-ups, each a timed launch, and two more for the winner's median.
  CHECK(o.launches == 8 + 2);
  CHECK(samples(o, 0) == static_cast<size_t>(kTuneMinSamples));
}

TEST_CASE("candidates that fail to launch are never chosen", "[timing_budget]") {
  SECTION("some fail") {
    FakeGpu g = gpu({-1, 1500, -1, 1400, 1600});
    const TuningOutcome o = g.tune();
    REQUIRE(o.best);
    CHECK(*o.best == 3);
    CHECK(o.candidates[0].failed);
    CHECK(o.candidates[2].failed);
  }
  SECTION("all fail") {
    FakeGpu g = gpu({-1, -1});
    const TuningOutcome o = g.tune();
    CHECK_FALSE(o.best);
    CHECK(o.launches == 0);
  }
  SECTION("none") {
    FakeGpu g = gpu({});
    CHECK_FALSE(g.tune().best);
  }
}

TEST_CASE("next_tuning_round: the steps of the policy", "[timing_budget]") {
  auto cand = [](std::vector<double> us, double warmup = 0) {
    TunedCandidate c;
    c.us = std::move(us);
    c.warmup_us = warmup > 0 ? warmup : (c.us.empty() ? 0 : c.us.front());
    return c;
  };
  SECTION("cheap: everyone to the maximum, nothing dropped") {
    std::vector<TunedCandidate> c = {cand({}, 10), cand({20}), cand({}, 15)};
    CHECK(next_tuning_round(c, 50, {}) == std::vector<int>{15, 14, 15});
    CHECK(std::none_of(c.begin(), c.end(), [](const TunedCandidate& x) { return x.dropped; }));
  }
  SECTION("expensive: those without a time are probed first") {
    std::vector<TunedCandidate> c = {cand({}, 5000), cand({5100}), cand({9000})};
    CHECK(next_tuning_round(c, 19'000, {}) == std::vector<int>{1, 0, 0});
  }
  SECTION("then the clearly slower are dropped and the close ones share the budget") {
    std::vector<TunedCandidate> c = {cand({5000}), cand({5100}), cand({9000})};
    const std::vector<int> r = next_tuning_round(c, 19'000, {});
    CHECK(c[2].dropped);
    CHECK_FALSE(c[1].dropped);
    CHECK(r == std::vector<int>{2, 2, 0});  // to the minimum, one launch at a time in turn
    // With less budget left the turns stop where it ends, the best first.
    CHECK(next_tuning_round(c, 44'000, {}) == std::vector<int>{2, 1, 0});
  }
  SECTION("a candidate dropped on the pass's first launch alone is timed again first") {
    std::vector<TunedCandidate> c = {cand({5500}), cand({5000})};
    c[0].after_idle = true;
    CHECK(next_tuning_round(c, 19'000, {}) == std::vector<int>{1, 0});
    CHECK_FALSE(c[0].dropped);
    c[0].us.push_back(5490);
    next_tuning_round(c, 24'000, {});
    CHECK(c[0].dropped);
  }
  SECTION("past the budget the best still reaches the minimum") {
    std::vector<TunedCandidate> c = {cand({5000}), cand({5100})};
    CHECK(next_tuning_round(c, 70'000, {}) == std::vector<int>{2, 0});
    c[0].us = {5000, 5001, 4999};
    CHECK(next_tuning_round(c, 80'000, {}) == std::vector<int>{0, 0});
  }
  SECTION("failed and dropped candidates get nothing") {
    std::vector<TunedCandidate> c = {cand({}, 10), cand({20})};
    c[0].failed = true;
    CHECK(next_tuning_round(c, 0, {}) == std::vector<int>{0, 14});
  }
}

TEST_CASE("replay_schedule: short plans keep the full schedule, long ones fit the budget",
          "[timing_budget]") {
  const FullSchedule graph{2, 7, 2.0};  // GemmBench::graph_us's, after its first timed forward
  for (double us : {5.0, 50.0, 500.0, 1000.0, 2000.0}) {
    INFO(us << " us per forward");
    const ReplaySchedule s = replay_schedule(us, graph);
    CHECK(s.full);
    CHECK(full_schedule_us(us, graph) <= kReplayBudgetUs);
  }
  for (double us : {5000.0, 10400.0, 50'000.0, 1e6}) {
    INFO(us << " us per forward");
    const ReplaySchedule s = replay_schedule(us, graph);
    CHECK_FALSE(s.full);
    CHECK(s.reps >= kMinReplays);
    CHECK(s.reps <= graph.reps);
    if (s.reps > kMinReplays) CHECK(s.reps * us <= kReplayBudgetUs);
  }
  CHECK(replay_schedule(5000, graph).reps == 6);
  CHECK(replay_schedule(10400, graph).reps == kMinReplays);
  // The full schedule of a short plan: many replays (7 repetitions of >= 2 ms each).
  CHECK(full_schedule_us(10, graph) >= 7 * 2000);
  // A copy's: one more warm-up and ten timed copies, whatever a copy of any real tensor costs.
  CHECK(replay_schedule(300, {1, 10, 0.0}).full);
  // No first timing (a failed or zero one): the full schedule, as before.
  CHECK(replay_schedule(0, graph).full);
}
