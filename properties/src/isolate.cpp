#include "attncheck/isolate.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

namespace attncheck {

std::string child_outcome::describe() const {
  if (completed) return "completed";
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
  std::chrono::steady_clock::time_point deadline;
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
  c.deadline = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(timeout_s));
  return c;
}

// Reaps a child whose pipe closed or whose time ran out.
child_outcome finish(running_child& c) {
  close(c.fd);
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  child_outcome out = std::move(c.out);
  if (!out.timed_out) {
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
    const std::function<void(const std::vector<std::size_t>& running, std::size_t finished)>& tick) {
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
    double wait_ms = 1000;
    std::vector<pollfd> pfds;
    for (auto& [i, c] : live) {
      const double left = std::chrono::duration<double, std::milli>(c.deadline - now).count();
      if (left <= 0) {
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

}  // namespace attncheck
