#include "server/http/http_server.h"

#include <httplib.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flashserve::server::http {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// What the accept thread tells the thread that serves a connection (httplib hands the pool an
// opaque closure around the socket): when it was accepted, and whether it is to be refused.
struct Admission {
  Clock::time_point accepted;
  bool refuse = false;
};
thread_local Admission tl_admission;
// The status of the response this thread wrote last (httplib's logger sees every response).
thread_local int tl_last_status = 0;
class Connection;
// The connection this thread serves now (client_connected()).
thread_local const Connection* tl_connection = nullptr;

template <typename R>
R taken() {
  if constexpr (!std::is_void_v<R>) return true;
}

// `threads` threads serve the connections httplib accepts; up to `max_queued` wait for one, and
// one more is handed back at once, marked to be refused (503), on the accept thread.
class Pool final : public httplib::TaskQueue {
 public:
  Pool(int threads, int max_queued) : max_queued_(static_cast<size_t>(max_queued)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
  }

  // void in httplib 0.11 and 0.14, bool (taken or not) in later versions.
  using EnqueueResult = decltype(std::declval<httplib::TaskQueue&>().enqueue(std::function<void()>()));
  EnqueueResult enqueue(std::function<void()> fn) override {
    push(std::move(fn));
    return taken<EnqueueResult>();
  }

  ~Pool() override { shutdown(); }  // httplib calls it first; joining twice is nothing

  void shutdown() override {  // the queued connections are still served (they see stop() and close)
    {
      std::lock_guard<std::mutex> lock(mu_);
      shutdown_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  size_t waiting() const { return waiting_.load(std::memory_order_relaxed); }

 private:
  struct Job {
    std::function<void()> fn;
    Clock::time_point accepted;
  };

  void push(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.size() < max_queued_ || shutdown_) {
        jobs_.push_back({std::move(fn), Clock::now()});
        waiting_ = jobs_.size();
        cv_.notify_one();
        return;
      }
    }
    tl_admission = {Clock::now(), true};
    fn();  // refused and closed here
  }

  void work() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return shutdown_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        waiting_ = jobs_.size();
      }
      tl_admission = {job.accepted, false};
      job.fn();
    }
  }

  const size_t max_queued_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool shutdown_ = false;
  std::atomic<size_t> waiting_{0};
};

std::string openssl_reason() {
  const unsigned long e = ERR_peek_last_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

Status make_tls_context(const HttpOptions& o, SSL_CTX** out) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return internal_error("TLS: " + openssl_reason());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);  // a client could make the server redo handshakes
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  Status st;
  if (SSL_CTX_use_certificate_chain_file(ctx, o.tls_cert_file.c_str()) != 1) {
    st = invalid_argument("TLS certificate " + o.tls_cert_file + ": " + openssl_reason());
  } else {
    const bool key_read = SSL_CTX_use_PrivateKey_file(ctx, o.tls_key_file.c_str(), SSL_FILETYPE_PEM) == 1;
    // A key of another certificate fails there already (OpenSSL 3), or in the check after.
    const bool mismatch = key_read ? SSL_CTX_check_private_key(ctx) != 1
                                   : ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    if (mismatch)
      st = invalid_argument("TLS: the key in " + o.tls_key_file + " does not match the certificate in " +
                            o.tls_cert_file);
    else if (!key_read)
      st = invalid_argument("TLS key " + o.tls_key_file + ": " + openssl_reason());
    ERR_clear_error();
  }
  if (!st.ok()) {
    SSL_CTX_free(ctx);
    return st;
  }
  *out = ctx;
  return Status::Ok();
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  auto* sa = reinterpret_cast<sockaddr*>(&a);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return;
  char buf[INET6_ADDRSTRLEN] = "";
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
    port = ntohs(v6->sin6_port);
  }
  ip = buf;
}

// One accepted connection: its non-blocking socket, its TLS session, and the bytes read ahead
// (which belong to the connection, not to one request: a pipelined next request starts there).
class Connection {
 public:
  Connection(int fd, int wake_fd) : fd_(fd), wake_fd_(wake_fd) {
    fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  }
  ~Connection() {
    if (ssl_ != nullptr) {
      if (ssl_clean_) SSL_shutdown(ssl_);  // close_notify, not waited for
      SSL_free(ssl_);
    }
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  int fd() const { return fd_; }
  bool stopped() const { return stopped_; }
  size_t buffered() const { return end_ - begin_; }

  // Until the socket is ready for `events` (or has an error or hang-up for the next call to
  // see): false when `deadline` passes first or stop() is called.
  bool wait(short events, Clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0 || stopped_) return false;
      pollfd p[2] = {{fd_, events, 0}, {wake_fd_, POLLIN, 0}};
      const int r = ::poll(p, 2, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
      if (r < 0 && errno != EINTR) return false;
      if (p[1].revents != 0) stopped_ = true;
      else if (r > 0 && p[0].revents != 0) return true;
    }
  }

  // Until the first byte of a request is here: at most keep_alive_timeout_s, or
  // idle_under_load_s while other connections wait for a thread (checked every 50 ms).
  bool await_request(const HttpOptions& o, const Pool* pool) {
    if (buffered() > 0 || (ssl_ != nullptr && SSL_pending(ssl_) > 0)) return true;
    const auto start = Clock::now();
    const auto idle_end = after(o.keep_alive_timeout_s);
    const auto busy_end =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.idle_under_load_s));
    for (;;) {
      const auto end = pool != nullptr && pool->waiting() > 0 ? std::min(idle_end, busy_end) : idle_end;
      const auto now = Clock::now();
      if (now >= end || stopped_) return false;
      if (wait(POLLIN, std::min(end, now + std::chrono::milliseconds(50)))) return true;
    }
  }

  bool handshake(SSL_CTX* ctx, Clock::time_point deadline) {
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return false;
    for (;;) {
      ERR_clear_error();
      const int r = SSL_accept(ssl_);
      if (r == 1) {
        ssl_clean_ = true;
        return true;
      }
      const int e = SSL_get_error(ssl_, r);
      const short want = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (want == 0 || !wait(want, deadline)) {
        ERR_clear_error();
        return false;
      }
    }
  }

  // Up to n bytes, from what was read ahead or by one read by `deadline`: > 0 bytes, 0 the peer
  // closed, -1 an error, the deadline or stop().
  ssize_t read(char* out, size_t n, Clock::time_point deadline) {
    if (buffered() == 0) {
      const ssize_t k = fill(deadline);
      if (k <= 0) return k;
    }
    const size_t m = std::min(n, buffered());
    std::memcpy(out, buf_ + begin_, m);
    begin_ += m;
    return static_cast<ssize_t>(m);
  }

  // All n bytes, each send within timeout_s: false on an error, a timeout or stop().
  bool write_all(const char* p, size_t n, double timeout_s) {
    while (n > 0) {
      ssize_t k = 0;
      short want = POLLOUT;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int r = SSL_write(ssl_, p, static_cast<int>(std::min<size_t>(n, INT_MAX)));
        if (r > 0) {
          k = r;
        } else {
          const int e = SSL_get_error(ssl_, r);
          if (e == SSL_ERROR_WANT_READ) {
            want = POLLIN;
          } else if (e != SSL_ERROR_WANT_WRITE) {
            fail_tls();
            return false;
          }
        }
      } else {
        k = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (k < 0) {
          if (errno == EINTR) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
          k = 0;
        }
      }
      if (k == 0) {
        if (!wait(want, after(timeout_s))) return false;
        continue;
      }
      p += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  }

  // The peer has not closed its side (a content provider asks before each chunk).
  // A hang-up is asked of poll() (POLLRDHUP: the peer's FIN), not of the bytes waiting: a TLS
  // client's unread close_notify, or a pipelined request, must not read as "open".
  bool peer_open() const {
    pollfd p{fd_, static_cast<short>(POLLRDHUP), 0};
    const int r = ::poll(&p, 1, 0);
    return r == 0 || (r > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) == 0);
  }

 private:
  ssize_t fill(Clock::time_point deadline) {
    begin_ = end_ = 0;
    for (;;) {
      short want = POLLIN;
      if (ssl_ != nullptr) {
        ERR_clear_error();
        const int r = SSL_read(ssl_, buf_, sizeof buf_);
        if (r > 0) {
          end_ = static_cast<size_t>(r);
          return r;
        }
        const int e = SSL_get_error(ssl_, r);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        if (e == SSL_ERROR_WANT_WRITE) {
          want = POLLOUT;
        } else if (e != SSL_ERROR_WANT_READ) {
          fail_tls();
          return -1;
        }
      } else {
        const ssize_t r = ::recv(fd_, buf_, sizeof buf_, 0);
        if (r >= 0) {
          end_ = static_cast<size_t>(r);
          return r;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      }
      if (!wait(want, deadline)) return -1;
    }
  }

  void fail_tls() {  // after a fatal TLS error the session must not be shut down
    ssl_clean_ = false;
    ERR_clear_error();
  }

  const int fd_;
  const int wake_fd_;
  SSL* ssl_ = nullptr;
  bool ssl_clean_ = false;
  bool stopped_ = false;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;
};

// One request's view of its connection, for httplib: reads end at the request's deadline and
// at the header and body limits; writes are each bounded by the write timeout.
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(Connection& c, const HttpOptions& o) : c_(c), o_(o), deadline_(after(o.request_timeout_s)) {}

  bool is_readable() const override { return c_.buffered() > 0 || c_.wait(POLLIN, read_deadline()); }
  bool is_writable() const override { return c_.wait(POLLOUT, after(o_.write_timeout_s)) && c_.peer_open(); }

  ssize_t read(char* ptr, size_t size) override {
    if (failed_) return -1;
    const ssize_t n = c_.read(ptr, size, read_deadline());
    if (n < 0) failed_ = true;
    if (n <= 0) return n;
    size_t body = static_cast<size_t>(n);
    if (in_headers_) {  // httplib reads the request line and headers one byte at a time
      size_t i = 0;
      while (i < static_cast<size_t>(n) && in_headers_) {
        tail_ = (tail_ << 8) | static_cast<unsigned char>(ptr[i++]);
        if ((tail_ & 0xffffffffu) == 0x0d0a0d0au) in_headers_ = false;  // "\r\n\r\n"
      }
      header_bytes_ += i;
      body -= i;
      if (header_bytes_ > o_.max_header_bytes) return over_limit();
    }
    body_bytes_ += body;
    // The body's limit is httplib's (413 by Content-Length); this one bounds what it reads in
    // any case (a chunked body, or one it skips), its framing allowed for.
    if (body_bytes_ > o_.max_body_bytes + o_.max_header_bytes) return over_limit();
    return n;
  }

  ssize_t write(const char* ptr, size_t size) override {  // the error status after a failed read too
    wrote_ = true;
    if (write_failed_ || !c_.write_all(ptr, size, o_.write_timeout_s)) {
      failed_ = write_failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd(), true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(c_.fd(), false, ip, port); }
  // httplib 0.11 and 0.14 read this only to answer 500 for a descriptor past FD_SETSIZE, which
  // their own streams cannot select() on. This stream polls, so a descriptor that high is told
  // as none (INVALID_SOCKET) rather than refused.
  socket_t socket() const override { return c_.fd() < FD_SETSIZE ? c_.fd() : -1; }

  bool failed() const { return failed_; }
  bool limit_hit() const { return limit_hit_; }
  bool wrote() const { return wrote_; }

 private:
  Clock::time_point read_deadline() const { return std::min(deadline_, after(o_.read_timeout_s)); }
  ssize_t over_limit() {
    failed_ = limit_hit_ = true;
    return -1;
  }

  Connection& c_;
  const HttpOptions& o_;
  const Clock::time_point deadline_;  // the whole request by then
  bool in_headers_ = true;
  uint32_t tail_ = 0;  // the last four bytes of the headers read
  size_t header_bytes_ = 0, body_bytes_ = 0;
  bool failed_ = false, write_failed_ = false, limit_hit_ = false, wrote_ = false;
};

std::string regex_escaped(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (std::strchr("\\^$.|?*+()[]{}", c) != nullptr) out += '\\';
    out += c;
  }
  return out;
}

bool finite_positive(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

class HttpServer::Listener final : public httplib::Server {
 public:
  Listener(const HttpOptions& o, SSL_CTX* ctx) : o_(o), ctx_(ctx) {
    int p[2] = {-1, -1};
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
      wake_read_ = p[0];
      wake_write_ = p[1];
    }
    new_task_queue = [this] {
      auto* pool = new Pool(o_.threads, o_.max_queued);
      pool_ = pool;
      return pool;
    };
    // What httplib itself reads of these: the Keep-Alive header and the body limit (413).
    set_keep_alive_max_count(static_cast<size_t>(o_.keep_alive_max_requests));
    set_keep_alive_timeout(static_cast<time_t>(std::ceil(o_.keep_alive_timeout_s)));
    set_payload_max_length(o_.max_body_bytes);
    // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a second server on the
    // same port would bind too and share the connections instead of failing.
    set_socket_options([](socket_t s) {
      const int one = 1;
      setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    });
    set_logger([](const httplib::Request&, const httplib::Response& res) { tl_last_status = res.status; });
  }
  ~Listener() override {
    if (svr_sock_ != INVALID_SOCKET) ::close(svr_sock_.exchange(INVALID_SOCKET));  // bound, never served
    if (wake_read_ >= 0) ::close(wake_read_);
    if (wake_write_ >= 0) ::close(wake_write_);
    if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  }

  bool valid() const { return wake_read_ >= 0; }
  // httplib listens with a backlog of 5 (compiled in): a burst of connections past it would wait
  // for SYN retransmits. Listening again on the bound socket only sets the backlog.
  void widen_backlog(int backlog) { ::listen(svr_sock_, backlog); }
  bool tls() const { return ctx_ != nullptr; }
  void wake() {  // every connection's wait returns from now on (the pipe stays readable)
    if (wake_write_ >= 0) {
      const ssize_t n = ::write(wake_write_, "x", 1);  // non-blocking: a full pipe is already awake
      (void)n;
    }
  }

 private:
  // httplib's per-connection entry (a private virtual of httplib::Server, overridden here): the
  // connection read as the header of http_server.h says, each request parsed, routed and
  // answered by httplib's process_request.
  bool process_and_close_socket(socket_t sock) override {
    const Admission admission = tl_admission;
    Connection c(sock, wake_read_);
    if (admission.refuse) {
      static constexpr char k503[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      if (ctx_ == nullptr) {  // best effort, never waited for
        const ssize_t n = ::send(sock, k503, sizeof k503 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        (void)n;
      }
      return false;
    }
    const Pool* pool = pool_.load();
    if (ctx_ != nullptr &&
        (!c.await_request(o_, pool) || !c.handshake(ctx_, after(o_.request_timeout_s))))
      return false;
    for (int served = 0; served < o_.keep_alive_max_requests; ++served) {
      if (!c.await_request(o_, pool)) return served > 0;
      RequestStream strm(c, o_);
      const bool last = served + 1 == o_.keep_alive_max_requests;
      bool connection_closed = false;
      tl_last_status = 0;
      tl_connection = &c;
      const bool ok = process_request(strm, last, connection_closed, nullptr);
      tl_connection = nullptr;
      if (strm.limit_hit() && !strm.wrote()) {  // the request line itself was too long
        static constexpr char k431[] =
            "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        c.write_all(k431, sizeof k431 - 1, o_.write_timeout_s);
      }
      if (!ok || connection_closed || strm.failed() || tl_last_status >= 400 || c.stopped()) return ok;
    }
    return true;
  }

  const HttpOptions& o_;
  SSL_CTX* const ctx_;
  int wake_read_ = -1, wake_write_ = -1;
  std::atomic<Pool*> pool_{nullptr};  // httplib owns it while it listens
};

Status HttpServer::create(const HttpOptions& o, std::unique_ptr<HttpServer>* out) {
  if (o.threads < 1 || o.max_queued < 0 || o.keep_alive_max_requests < 1 || o.max_header_bytes < 64 ||
      !finite_positive(o.request_timeout_s) || !finite_positive(o.read_timeout_s) ||
      !finite_positive(o.write_timeout_s) || !finite_positive(o.keep_alive_timeout_s) ||
      !finite_positive(o.idle_under_load_s))
    return invalid_argument("http: threads and keep_alive_max_requests must be >= 1, timeouts positive");
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    return invalid_argument("http: TLS needs both a certificate and a key");
  SSL_CTX* ctx = nullptr;
  if (!o.tls_cert_file.empty()) FS_RETURN_IF_ERROR(make_tls_context(o, &ctx));
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->options_ = o;
  s->listener_ = std::make_unique<Listener>(s->options_, ctx);  // owns ctx from here
  if (!s->listener_->valid()) return internal_error(std::string("http: pipe: ") + std::strerror(errno));
  errno = 0;
  const int port = o.port == 0 ? s->listener_->bind_to_any_port(o.host)
                               : (s->listener_->bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) {
    const int err = errno;
    return unsupported("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                       (err != 0 ? std::string(": ") + std::strerror(err) : std::string()));
  }
  s->port_ = port;
  s->listener_->widen_backlog(128);
  // A registered path asked with another method: 405 with the methods it has.
  s->listener_->set_pre_routing_handler([srv = s.get()](const httplib::Request& req, httplib::Response& res) {
    const auto it = srv->methods_.find(req.path);
    if (it == srv->methods_.end() || it->second.count(req.method) > 0) return httplib::Server::HandlerResponse::Unhandled;
    std::string allow;
    for (const auto& m : it->second) allow += (allow.empty() ? "" : ", ") + m;
    res.status = 405;
    res.set_header("Allow", allow);
    res.set_content("method not allowed\n", "text/plain; charset=utf-8");
    return httplib::Server::HandlerResponse::Handled;
  });
  *out = std::move(s);
  return Status::Ok();
}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::tls() const { return listener_ != nullptr && listener_->tls(); }

void HttpServer::get(const std::string& path, Access access, Handler handler) {
  methods_[path].insert({"GET", "HEAD"});
  route("GET", path, access, std::move(handler));
}

void HttpServer::post(const std::string& path, Access access, Handler handler) {
  methods_[path].insert("POST");
  route("POST", path, access, std::move(handler));
}

void HttpServer::route(const char* method, const std::string& path, Access access, Handler handler) {
  auto checked = [this, access, h = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    if (access == Access::kToken && options_.authorize) {
      const bool sent = req.has_header("Authorization");
      const std::string authorization = sent ? req.get_header_value("Authorization") : std::string();
      if (!options_.authorize(sent ? &authorization : nullptr)) {
        res.status = 401;
        res.set_header("WWW-Authenticate", "Bearer");
        res.set_content("a valid bearer token is required\n", "text/plain; charset=utf-8");
        return;
      }
    }
    h(req, res);
  };
  if (std::string_view(method) == "POST")
    listener_->Post(regex_escaped(path), std::move(checked));
  else
    listener_->Get(regex_escaped(path), std::move(checked));
}

void HttpServer::set_error_body(std::function<void(const httplib::Request&, httplib::Response&)> write) {
  httplib::Server::HandlerWithResponse handler = [w = std::move(write)](const httplib::Request& req,
                                                                          httplib::Response& res) {
    if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    w(req, res);
    return httplib::Server::HandlerResponse::Handled;
  };
  listener_->set_error_handler(std::move(handler));
}

bool client_connected() { return tl_connection == nullptr || tl_connection->peer_open(); }

Status HttpServer::start() {
  if (thread_.joinable()) return invalid_argument("http: already started");
  listening_ = true;
  thread_ = std::thread([this] {
    listener_->listen_after_bind();
    listening_ = false;
  });
  // httplib's stop() does nothing until listen_after_bind() runs: wait for it.
  while (!listener_->is_running() && listening_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!listening_) {
    thread_.join();
    return internal_error("http: the listener on port " + std::to_string(port_) + " stopped at once");
  }
  return Status::Ok();
}

void HttpServer::stop() {
  if (listener_ == nullptr) return;
  listener_->wake();  // idle connections close, busy ones fail their next wait
  listener_->stop();  // the listening socket: accept() returns, the pool is shut down and joined
  if (thread_.joinable()) thread_.join();
}

}  // namespace flashserve::server::http
