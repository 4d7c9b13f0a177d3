// Client cancellation for handlers that block on an engine stream. gRPC's synchronous API tells
// a handler that its client went away (a cancel, a deadline, a lost connection) only when the
// handler asks (ServerContext::IsCancelled) or when a Write fails; a handler blocked in
// ResultStream::next() asks nothing. So one thread asks for every watched call, every period, and
// runs a cancelled call's action once (Generate's: cancel the engine request, whose stream then
// ends with kAborted and wakes the handler). The handler itself sleeps until its stream has an
// event, instead of waking every 50 ms to ask (before issue 26).
#pragma once

#include <condition_variable>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <thread>

namespace grpc {
class ServerContextBase;
}

namespace flashserve::server {

class CancelWatch {
 public:
  explicit CancelWatch(double period_s = 0.05);
  ~CancelWatch();  // joins the thread; every Watch must be gone
  CancelWatch(const CancelWatch&) = delete;
  CancelWatch& operator=(const CancelWatch&) = delete;

  struct Call;
  // One watched call; unwatched when destroyed, after which its action never runs.
  class Watch {
   public:
    ~Watch();
    // The watcher saw the call cancelled (and ran the action).
    bool cancelled() const;
    // Held while the handler is inside a gRPC call on the context (a Write): the watcher skips
    // the call then rather than ask gRPC about the same call from a second thread.
    std::mutex& in_grpc();

   private:
    friend class CancelWatch;
    Watch(CancelWatch* owner, std::list<Call>::iterator call) : owner_(owner), call_(call) {}
    CancelWatch* owner_;
    std::list<Call>::iterator call_;
  };

  // Watches ctx (valid until the Watch is destroyed); on_cancel runs once, on the watcher's thread.
  std::unique_ptr<Watch> watch(grpc::ServerContextBase* ctx, std::function<void()> on_cancel);

 private:
  void loop();

  const double period_s_;
  std::mutex mu_;  // guards calls_ and stopping_; held while an action runs
  std::condition_variable cv_;
  std::list<Call> calls_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace flashserve::server
