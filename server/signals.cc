#include "server/signals.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace flashserve::server {

namespace {

sigset_t termination_set() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  return s;
}

void block_termination_signals(int, char**, char**) {
  const sigset_t s = termination_set();
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
}

}  // namespace

// Runs before any shared library's constructor (see signals.h); only an executable's
// .preinit_array is honoured, which is why this file is compiled into flashserve_server.
__attribute__((section(".preinit_array"), used)) static void (*const kBlockEarly)(int, char**, char**) =
    &block_termination_signals;

TerminationSignals::TerminationSignals() {
  block_termination_signals(0, nullptr, nullptr);  // in case the loader did not run .preinit_array
  thread_ = std::thread([this] { loop(); });
}

TerminationSignals::~TerminationSignals() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

int TerminationSignals::wait_for_signal(std::function<void()> on_repeat) {
  std::unique_lock<std::mutex> lock(mu_);
  on_repeat_ = std::move(on_repeat);
  serving_ = true;
  cv_.wait(lock, [&] { return first_signal_ != 0; });
  return first_signal_;
}

void TerminationSignals::loop() {
  const sigset_t set = termination_set();
  const timespec tick{0, 100'000'000};  // how often stop_ is looked at
  while (!stop_) {
    siginfo_t info;
    const int sig = sigtimedwait(&set, &info, &tick);
    if (sig < 0) continue;  // EAGAIN (the tick) or EINTR
    std::function<void()> repeat;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!serving_) {  // start-up: nothing to drain
        spdlog::info("signal {} during start-up: exiting", sig);
        spdlog::default_logger()->flush();
        std::fflush(stdout);
        std::_Exit(0);
      }
      if (first_signal_ == 0) {
        first_signal_ = sig;
        cv_.notify_all();
        continue;
      }
      repeat = on_repeat_;
    }
    if (repeat) {
      spdlog::info("signal {} again: cutting the drain short", sig);
      repeat();
    }
  }
}

}  // namespace flashserve::server
