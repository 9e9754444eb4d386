#include "attncheck/isolate.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <new>

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

child_outcome run_isolated(const std::function<std::string()>& fn, double timeout_s) {
  child_outcome out;
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[1 << 16];
  bool eof = false;
  while (!eof) {
    const auto left = std::chrono::duration<double, std::milli>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      out.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(std::min(left, 1000.0)) + 1);
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) out.payload.append(buf, static_cast<std::size_t>(n));
    else eof = true;
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!out.timed_out) {
    if (WIFSIGNALED(status)) out.signal = WTERMSIG(status);
    else if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    out.completed = WIFEXITED(status) && out.exit_code == 0;
    if (out.exit_code == 3 && !out.payload.empty() && out.payload[0] == '\x01')
      throw std::runtime_error(out.payload.substr(1));
  }
  return out;
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
