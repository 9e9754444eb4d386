#include "thread_pool.hpp"

#include <algorithm>

namespace attnimpl {

thread_pool& thread_pool::instance() {
  static thread_pool pool;
  return pool;
}

thread_pool::~thread_pool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void thread_pool::run(int threads, std::int64_t n, const std::function<void(std::int64_t, int)>& fn,
                      const std::function<void(int)>* prepare) {
  if (threads <= 1 || n <= 1) {
    if (prepare && n > 0) (*prepare)(0);
    for (std::int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  std::lock_guard run_lock(run_mutex_);
  const int helpers = static_cast<int>(std::min<std::int64_t>(threads - 1, n - 1));
  {
    std::lock_guard lock(mutex_);
    while (static_cast<int>(workers_.size()) < helpers) {
      const int index = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, index] { worker_loop(index); });
    }
    job_ = &fn;
    prepare_ = prepare;
    tasks_ = n;
    next_.store(0, std::memory_order_relaxed);
    helpers_ = helpers;
    pending_ = helpers;
    ++generation_;
  }
  wake_.notify_all();
  work(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
  prepare_ = nullptr;
}

void thread_pool::work(int index) {
  if (prepare_) (*prepare_)(index);
  for (;;) {
    const std::int64_t task = next_.fetch_add(1, std::memory_order_relaxed);
    if (task >= tasks_) return;
    (*job_)(task, index);
  }
}

void thread_pool::worker_loop(int index) {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index > helpers_) continue;
    lock.unlock();
    work(index);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace attnimpl
