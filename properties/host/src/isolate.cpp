#include "attncheck/isolate.hpp"

#include "attncheck/enum_names.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

namespace attncheck {

std::string child_outcome::describe() const {
  if (completed) return "completed";
  if (call_overdue) return "stopped by the per-call watchdog (a call into the subject ran past its limit)";
  if (timed_out) return "no result within the time limit (killed)";
  if (signal) {
    const char* name = sigabbrev_np(signal);
    return std::string("killed by SIG") + (name ? name : std::to_string(signal).c_str());
  }
  return "exited with code " + std::to_string(exit_code) + " before reporting";
}

namespace {

// One forked child: its pid, the read end of its pipe, what it sent so far.
struct running_child {
  pid_t pid = -1;
  int fd = -1;
  std::chrono::steady_clock::time_point start, deadline;
  child_outcome out;
  bool eof = false;
};

running_child spawn(const std::function<std::string()>& fn, double timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);  // no duplicated buffered output in the child
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    close(fds[0]);
    std::string payload;
    int code = 0;
    try {
      payload = fn();
    } catch (const std::exception& e) {
      payload = std::string("\x01") + e.what();  // an exception in the harness itself
      code = 3;
    }
    const char* p = payload.data();
    std::size_t left = payload.size();
    while (left > 0) {
      const ssize_t n = ::write(fds[1], p, left);
      if (n <= 0) break;
      p += n, left -= static_cast<std::size_t>(n);
    }
    close(fds[1]);
    std::fflush(nullptr);
    _exit(code);  // no static destructors: the parent owns them
  }
  close(fds[1]);
  running_child c;
  c.pid = pid;
  c.fd = fds[0];
  c.start = std::chrono::steady_clock::now();
  c.deadline =
      c.start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  return c;
}

// Reaps a child whose pipe closed or whose time ran out.
child_outcome finish(running_child& c) {
  close(c.fd);
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_outcome out = std::move(c.out);
  out.ended = std::chrono::steady_clock::now();
  out.seconds = std::chrono::duration<double>(out.ended - c.start).count();
  if (!out.timed_out && !out.call_overdue) {
    if (WIFSIGNALED(status))
      out.signal = WTERMSIG(status);
    else if (WIFEXITED(status))
      out.exit_code = WEXITSTATUS(status);
    out.completed = WIFEXITED(status) && out.exit_code == 0;
    if (out.exit_code == 3 && !out.payload.empty() && out.payload[0] == '\x01') throw std::runtime_error(out.payload.substr(1));
  }
  return out;
}

}  // namespace

child_outcome run_isolated(const std::function<std::string()>& fn, double timeout_s) {
  return run_isolated_all({fn}, timeout_s, 1).front();
}

std::vector<child_outcome> run_isolated_all(
    const std::vector<std::function<std::string()>>& fns, double timeout_s, int jobs,
    const std::function<void(const std::vector<std::size_t>& running, std::size_t finished)>& tick,
    const std::function<bool(std::size_t)>& overdue) {
  std::size_t finished = 0;
  std::vector<child_outcome> results(fns.size());
  std::vector<std::pair<std::size_t, running_child>> live;
  std::size_t next = 0;
  char buf[1 << 16];
  while (next < fns.size() || !live.empty()) {
    while (next < fns.size() && static_cast<int>(live.size()) < std::max(1, jobs)) {
      live.emplace_back(next, spawn(fns[next], timeout_s));
      ++next;
    }
    const auto now = std::chrono::steady_clock::now();
    double wait_ms = overdue ? 100 : 1000;
    std::vector<pollfd> pfds;
    for (auto& [i, c] : live) {
      const double left = std::chrono::duration<double, std::milli>(c.deadline - now).count();
      if (!c.eof && overdue && overdue(i)) {
        c.out.call_overdue = true;
        kill(c.pid, SIGKILL);
        c.eof = true;
      } else if (!c.eof && left <= 0) {
        c.out.timed_out = true;
        kill(c.pid, SIGKILL);
        c.eof = true;
      }
      wait_ms = std::min(wait_ms, std::max(0.0, left));
      pfds.push_back({c.fd, POLLIN, 0});
    }
    const int r = poll(pfds.data(), pfds.size(), static_cast<int>(wait_ms) + 1);
    if (r < 0 && errno != EINTR) throw std::runtime_error("poll failed");
    for (std::size_t k = 0; k < live.size() && r > 0; ++k) {
      auto& c = live[k].second;
      if (c.eof || !(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(c.fd, buf, sizeof buf);
      if (n > 0)
        c.out.payload.append(buf, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR)
        c.eof = true;
    }
    for (std::size_t k = 0; k < live.size();) {
      if (live[k].second.eof) {
        results[live[k].first] = finish(live[k].second);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
        ++finished;
      } else {
        ++k;
      }
    }
    if (tick) {
      std::vector<std::size_t> running;
      for (const auto& l : live) running.push_back(l.first);
      tick(running, finished);
    }
  }
  return results;
}

shared_note::shared_note(std::size_t capacity) : capacity_(capacity) {
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<char*>(p);
  data_[0] = 0;
}

shared_note::~shared_note() { munmap(data_, capacity_); }

void shared_note::write(const std::string& s) {
  const std::size_t n = std::min(s.size(), capacity_ - 1);
  std::memcpy(data_, s.data(), n);
  data_[n] = 0;
}

std::string shared_note::read() const { return std::string(data_, strnlen(data_, capacity_)); }

const char* law_phase_name(law_phase p) {
  static constexpr name_table<law_phase, 3> names{
      {{law_phase::starting, "starting"}, {law_phase::checking, "generating and checking"}, {law_phase::shrinking, "shrinking"}}};
  return name_in(names, p, "starting").data();  // string literals: NUL-terminated
}

namespace {

std::int64_t now_ns(std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::int64_t load(const std::int64_t& x) { return __atomic_load_n(&x, __ATOMIC_ACQUIRE); }
void store(std::int64_t& x, std::int64_t v) { __atomic_store_n(&x, v, __ATOMIC_RELEASE); }

law_watch* current_watch = nullptr;

}  // namespace

// Shared across fork (the steady clock is CLOCK_MONOTONIC: one time base for
// parent and child). Times in nanoseconds; call_start 0 while no call runs.
struct law_watch::block {
  std::int64_t call_start, call_deadline, call_work, call_expected, calls;
  std::int64_t phase, law_start, shrink_start, in_case;
  std::int64_t depth, total_ns, total_work;  // the child's own bookkeeping
  char entry[96];
};

law_watch::law_watch(watchdog_limits limits) : limits_(limits) {
  void* p = mmap(nullptr, sizeof(block), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  b_ = new (p) block{};
}

law_watch::~law_watch() { munmap(b_, sizeof(block)); }

void law_watch::begin_call(const char* entry, std::int64_t work) {
  if (b_->depth++ > 0) {
    // A step of the call in flight: name it, keep the outer deadline.
    const std::size_t outer = strnlen(b_->entry, sizeof b_->entry);
    const char* colon = static_cast<const char*>(std::memchr(b_->entry, ':', outer));
    const std::size_t keep = colon ? static_cast<std::size_t>(colon - b_->entry) : outer;
    std::snprintf(b_->entry + keep, sizeof b_->entry - keep, ": %s", entry);
    return;
  }
  std::snprintf(b_->entry, sizeof b_->entry, "%s", entry);
  const double expected = b_->total_work > 0 && work > 0 ? static_cast<double>(b_->total_ns) * static_cast<double>(work) /
                                                               static_cast<double>(b_->total_work)
                                                         : 0.0;
  const double limit = std::max(limits_.floor_s * 1e9, limits_.factor * expected);
  const std::int64_t start = now_ns();
  store(b_->call_work, work);
  store(b_->call_expected, static_cast<std::int64_t>(expected));
  store(b_->call_deadline, start + static_cast<std::int64_t>(std::min(limit, 1e18)));
  store(b_->call_start, start);
}

void law_watch::end_call() {
  if (b_->depth == 0 || --b_->depth > 0) return;
  const std::int64_t start = load(b_->call_start);
  store(b_->call_start, 0);
  if (b_->call_work > 0) {
    b_->total_ns += now_ns() - start;
    b_->total_work += b_->call_work;
  }
  store(b_->calls, b_->calls + 1);
}

void law_watch::enter_phase(law_phase p) {
  const std::int64_t t = now_ns();
  if (p == law_phase::checking) store(b_->law_start, t);
  if (p == law_phase::shrinking) store(b_->shrink_start, t);
  store(b_->phase, static_cast<std::int64_t>(p));
}

void law_watch::begin_case() { store(b_->in_case, 1); }
void law_watch::end_case() { store(b_->in_case, 0); }

law_watch::state law_watch::read(std::chrono::steady_clock::time_point now) const {
  state s;
  const std::int64_t t = now_ns(now);
  const std::int64_t start = load(b_->call_start);
  s.in_call = start != 0;
  if (s.in_call) {
    s.entry = std::string(b_->entry, strnlen(b_->entry, sizeof b_->entry));
    s.work = load(b_->call_work);
    s.call_seconds = static_cast<double>(t - start) * 1e-9;
    s.limit_seconds = static_cast<double>(load(b_->call_deadline) - start) * 1e-9;
    s.expected_seconds = static_cast<double>(load(b_->call_expected)) * 1e-9;
  }
  s.calls = load(b_->calls);
  s.in_case = load(b_->in_case) != 0;
  s.phase = static_cast<law_phase>(load(b_->phase));
  const std::int64_t law_start = load(b_->law_start), shrink_start = load(b_->shrink_start);
  if (law_start) {
    const std::int64_t checked_until = shrink_start ? shrink_start : t;
    s.checking_seconds = static_cast<double>(checked_until - law_start) * 1e-9;
    if (shrink_start) s.shrinking_seconds = static_cast<double>(t - shrink_start) * 1e-9;
  }
  return s;
}

bool law_watch::overdue(std::chrono::steady_clock::time_point now) const {
  const std::int64_t start = load(b_->call_start);
  return start != 0 && now_ns(now) > load(b_->call_deadline);
}

void set_call_watch(law_watch* w) { current_watch = w; }

namespace {
bool isolate_calls = false;
}  // namespace

void set_call_isolation(bool on) { isolate_calls = on; }
bool call_isolation() { return isolate_calls; }

watched_call::watched_call(const char* entry, std::int64_t work) : w_(current_watch) {
  if (w_) w_->begin_call(entry, work);
}

watched_call::~watched_call() {
  if (w_) w_->end_call();
}

}  // namespace attncheck
