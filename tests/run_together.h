// Concurrency in tests: `n` threads that start their work at the same moment, so that they meet
// inside the code under test (a build in flight, a cache entry being written) rather than one
// after another.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace mlpc::test {

// Runs f(t) for t in [0, n) on n threads, each waiting until all have started; joins them.
template <class F>
void run_together(int n, F&& f) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < n) std::this_thread::yield();
      f(t);
    });
  for (std::thread& th : threads) th.join();
}

}  // namespace mlpc::test
