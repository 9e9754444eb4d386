// A small persistent pool of std::threads. Tasks are claimed from an atomic
// counter, so which worker runs which task varies; the kernel makes every
// task's result independent of that (determinism does not rest on the pool).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attnimpl {

class thread_pool {
 public:
  /// The process-wide pool; grows to the largest thread count ever asked for.
  static thread_pool& instance();

  ~thread_pool();

  /// Runs fn(task, worker) for every task in [0, n) on at most `threads`
  /// workers (the caller is worker 0; others are 1..threads-1) and waits.
  /// Every worker that takes part first calls prepare(worker), when given,
  /// whether or not it then wins a task (per-thread scratch grows in one call).
  /// Concurrent callers are serialized.
  void run(int threads, std::int64_t n, const std::function<void(std::int64_t, int)>& fn,
           const std::function<void(int)>* prepare = nullptr);

 private:
  void worker_loop(int index);
  void work(int index);

  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(std::int64_t, int)>* job_ = nullptr;
  const std::function<void(int)>* prepare_ = nullptr;
  std::int64_t tasks_ = 0;
  std::atomic<std::int64_t> next_{0};
  int helpers_ = 0;
  int pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace attnimpl
