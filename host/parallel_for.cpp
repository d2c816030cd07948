#include "host/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace mlpc::runtime {

void parallel_for(int64_t n, const std::function<void(int64_t)>& f) {
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < n;) f(i);
  };
  const int64_t threads =
      std::min<int64_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace mlpc::runtime
