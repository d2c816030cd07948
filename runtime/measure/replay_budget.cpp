#include "runtime/measure/replay_budget.h"

#include <algorithm>
#include <cmath>

namespace mlpc::runtime {

double full_schedule_us(double first_us, const FullSchedule& full) {
  const double each = std::max(first_us, 0.0);
  const double rep_us = std::max(full.min_rep_ms * 1e3, each);
  // Calibration grows a loop by 4x until it lasts a tenth of a repetition: at most 4/3 of that.
  const double calibration_us = std::max(each, rep_us / 10) * 4 / 3;
  return full.warmup * each + calibration_us + full.reps * rep_us;
}

ReplaySchedule replay_schedule(double first_us, const FullSchedule& full, double budget_us) {
  if (!(first_us > 0) || full_schedule_us(first_us, full) <= budget_us) return {true, 0};
  const double fit = std::floor(budget_us / first_us);
  const int most = std::max(full.reps, kMinReplays);
  return {false, static_cast<int>(std::clamp<double>(fit, kMinReplays, most))};
}

}  // namespace mlpc::runtime
