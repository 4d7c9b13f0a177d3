#include "server/grpc/cancel_watch.h"

#include <grpcpp/server_context.h>

#include <atomic>
#include <chrono>

namespace flashserve::server {

struct CancelWatch::Call {
  grpc::ServerContextBase* ctx;
  std::function<void()> on_cancel;
  std::atomic<bool> cancelled{false};
  std::mutex in_grpc;
};

CancelWatch::CancelWatch(double period_s) : period_s_(period_s), thread_([this] { loop(); }) {}

CancelWatch::~CancelWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::unique_ptr<CancelWatch::Watch> CancelWatch::watch(grpc::ServerContextBase* ctx, std::function<void()> on_cancel) {
  std::list<Call>::iterator it;
  {
    std::lock_guard<std::mutex> lock(mu_);
    it = calls_.emplace(calls_.end());
    it->ctx = ctx;
    it->on_cancel = std::move(on_cancel);
  }
  cv_.notify_all();
  return std::unique_ptr<Watch>(new Watch(this, it));
}

CancelWatch::Watch::~Watch() {
  std::lock_guard<std::mutex> lock(owner_->mu_);
  owner_->calls_.erase(call_);
}

bool CancelWatch::Watch::cancelled() const { return call_->cancelled.load(std::memory_order_acquire); }

std::mutex& CancelWatch::Watch::in_grpc() { return call_->in_grpc; }

void CancelWatch::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !calls_.empty(); });  // no calls: no polling
    if (stopping_) return;
    for (Call& c : calls_) {
      if (c.cancelled.load(std::memory_order_relaxed)) continue;
      std::unique_lock<std::mutex> busy(c.in_grpc, std::try_to_lock);
      if (!busy.owns_lock() || !c.ctx->IsCancelled()) continue;  // in a Write: that one will fail
      c.cancelled.store(true, std::memory_order_release);
      c.on_cancel();
    }
    cv_.wait_for(lock, std::chrono::duration<double>(period_s_), [&] { return stopping_; });
  }
}

}  // namespace flashserve::server
