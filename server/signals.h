// SIGTERM and SIGINT for the serving process, taken by a thread of its own (sigtimedwait), so no
// handler ever runs inside the engine or a library.
//
// They are blocked before any code of ours or of a library runs: signals.cc puts a function in
// the executable's .preinit_array, which the dynamic loader calls before every shared library's
// constructor. Every thread inherits that mask, OpenBLAS's pool (started when the library
// loads) included, so no thread can be killed by these signals; before, a signal that came
// while main() was not in sigwait went to such a thread and killed the process (issue 24).
// Only a signal that arrives while the loader is still mapping the libraries keeps its
// default action.
//
// Phases: while starting, a signal ends the process at once with exit code 0 (nothing has been
// served; a pod deleted while its model loads goes promptly). Once serving, the first signal
// wakes wait_for_signal() (the caller drains); every later one calls `on_repeat` (the caller
// cuts the drain short).
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace flashserve::server {

class TerminationSignals {
 public:
  TerminationSignals();   // starts the thread; the process is in the starting phase
  ~TerminationSignals();  // joins it (within 100 ms); later signals stay pending
  TerminationSignals(const TerminationSignals&) = delete;
  TerminationSignals& operator=(const TerminationSignals&) = delete;

  // Enters the serving phase and blocks until a signal; returns its number. `on_repeat` is
  // called from the signal thread for each later signal, until this object is destroyed.
  int wait_for_signal(std::function<void()> on_repeat);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  bool serving_ = false;
  int first_signal_ = 0;
  std::function<void()> on_repeat_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace flashserve::server
