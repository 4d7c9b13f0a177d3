// The HTTP listener (server/http/http_server.h) with short limits: exact routes, 405, the token,
// idle and slow connections closed on time, idle ones giving way under load, the queue's 503,
// the header limit, stop() with connections held, a port in use, and TLS start-up errors.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "server/http/http_server.h"

namespace flashserve::server::http {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{5, 0};  // no read of a test waits longer
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Everything the server sends until it closes the connection (or 5 s pass).
std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string roundtrip(int port, const std::string& request) {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out = read_all(fd);
  close(fd);
  return out;
}

int status_of(const std::string& response) {
  return response.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(response.c_str() + 9) : 0;
}

std::string get_request(const std::string& path, const std::string& headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + headers + "Connection: close\r\n\r\n";
}

struct Served {
  std::unique_ptr<HttpServer> server;
  std::atomic<int> calls{0};
};

std::unique_ptr<Served> serve(HttpOptions o) {
  auto s = std::make_unique<Served>();
  const Status st = HttpServer::create(o, &s->server);
  EXPECT_TRUE(st.ok()) << st.to_string();
  if (!st.ok()) return s;
  Served* raw = s.get();
  s->server->get("/a", Access::kOpen, [raw](const httplib::Request&, httplib::Response& res) {
    ++raw->calls;
    res.set_content("a\n", "text/plain");
  });
  s->server->get("/v1.x", Access::kOpen, [](const httplib::Request&, httplib::Response& res) {
    res.set_content("dot\n", "text/plain");
  });
  s->server->get("/secret", Access::kToken, [](const httplib::Request&, httplib::Response& res) {
    res.set_content("secret\n", "text/plain");
  });
  EXPECT_TRUE(s->server->start().ok());
  return s;
}

TEST(HttpServer, RoutesAreExactAndOtherMethodsAre405) {
  auto s = serve({});
  const int port = s->server->port();
  EXPECT_EQ(status_of(roundtrip(port, get_request("/a"))), 200);
  EXPECT_EQ(status_of(roundtrip(port, get_request("/a?x=1"))), 200);
  for (const char* path : {"/", "/a/", "/ab", "/A", "/v1yx", "/nope"})
    EXPECT_EQ(status_of(roundtrip(port, get_request(path))), 404) << path;
  EXPECT_EQ(status_of(roundtrip(port, get_request("/v1.x"))), 200) << "a '.' in a path is a dot, not a regex";
  const std::string post =
      roundtrip(port, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc");
  EXPECT_EQ(status_of(post), 405);
  EXPECT_NE(post.find("Allow: GET, HEAD"), std::string::npos) << post;
  const std::string head = roundtrip(port, "HEAD /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(status_of(head), 200);
  EXPECT_EQ(head.find("\r\n\r\na\n"), std::string::npos) << "HEAD has no body";
  EXPECT_EQ(status_of(roundtrip(port, "GET /a\r\n\r\n")), 400);
  EXPECT_EQ(status_of(roundtrip(port, "BREW /a HTTP/1.1\r\n\r\n")), 400);
}

TEST(HttpServer, TokenRoutesAskAuthorize) {
  HttpOptions o;
  std::atomic<int> asked{0};
  o.authorize = [&asked](const std::string* authorization) {
    ++asked;
    return authorization != nullptr && *authorization == "Bearer t";
  };
  auto s = serve(o);
  const int port = s->server->port();
  const std::string none = roundtrip(port, get_request("/secret"));
  EXPECT_EQ(status_of(none), 401);
  EXPECT_NE(none.find("WWW-Authenticate: Bearer"), std::string::npos);
  EXPECT_EQ(none.find("secret\n"), std::string::npos);
  EXPECT_EQ(status_of(roundtrip(port, get_request("/secret", "Authorization: Bearer x\r\n"))), 401);
  EXPECT_EQ(status_of(roundtrip(port, get_request("/secret", "Authorization: Bearer t\r\n"))), 200);
  EXPECT_EQ(status_of(roundtrip(port, get_request("/secret", "authorization: Bearer t\r\n"))), 200);
  const int before = asked;
  EXPECT_EQ(status_of(roundtrip(port, get_request("/a"))), 200) << "an open route needs no token";
  EXPECT_EQ(asked, before);
}

TEST(HttpServer, IdleConnectionsCloseAtTheKeepAliveTimeout) {
  HttpOptions o;
  o.keep_alive_timeout_s = 0.3;
  auto s = serve(o);
  auto t0 = Clock::now();
  int fd = connect_to(s->server->port());
  EXPECT_EQ(read_all(fd), "");  // closed without a byte
  EXPECT_LT(seconds_since(t0), 3.0);  // (not the 5 s read timeout; room for a loaded machine)
  EXPECT_GT(seconds_since(t0), 0.2);
  close(fd);
  // After a keep-alive request, the same.
  fd = connect_to(s->server->port());
  const std::string req = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  t0 = Clock::now();
  const std::string out = read_all(fd);
  EXPECT_EQ(status_of(out), 200);
  EXPECT_LT(seconds_since(t0), 3.0);
  close(fd);
}

TEST(HttpServer, ASlowRequestIsCutAtTheRequestTimeout) {
  HttpOptions o;
  o.request_timeout_s = 0.5;  // each byte comes well within read_timeout_s (5 s)
  auto s = serve(o);
  const int fd = connect_to(s->server->port());
  const std::string req = "GET /a HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
  const auto t0 = Clock::now();
  bool cut = false;
  for (char c : req) {
    if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
      cut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (seconds_since(t0) > 3) break;
  }
  const std::string out = read_all(fd);
  EXPECT_TRUE(cut || status_of(out) != 200) << out;
  EXPECT_LT(seconds_since(t0), 2.5) << "a byte every 50 ms kept the connection past its request timeout";
  EXPECT_EQ(s->calls, 0);
  close(fd);
}

TEST(HttpServer, IdleConnectionsGiveWayWhenOthersWait) {
  HttpOptions o;
  o.threads = 2;
  o.keep_alive_timeout_s = 10;
  o.idle_under_load_s = 0.2;
  auto s = serve(o);
  const int port = s->server->port();
  std::vector<int> silent;
  for (int i = 0; i < 6; ++i) silent.push_back(connect_to(port));  // both threads, and 4 queued
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  EXPECT_EQ(status_of(roundtrip(port, get_request("/a"))), 200);
  EXPECT_LT(seconds_since(t0), 5.0) << "silent connections held both threads for their whole keep-alive timeout";
  for (int fd : silent) close(fd);
}

TEST(HttpServer, PastTheQueueIs503AtOnce) {
  HttpOptions o;
  o.threads = 1;
  o.max_queued = 1;
  o.keep_alive_timeout_s = 5;
  o.idle_under_load_s = 5;  // the silent ones hold on
  auto s = serve(o);
  const int port = s->server->port();
  // The thread: held once it has answered a keep-alive request on the connection (a fixed sleep
  // could pass before the thread took it on a loaded machine). The queue: the next connection
  // accepted (one accept thread, in order), so the third finds it full.
  const int held = connect_to(port);
  const std::string keep_alive = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
  send(held, keep_alive.data(), keep_alive.size(), MSG_NOSIGNAL);
  std::string first;
  char buf[512];
  for (ssize_t n; first.find("\r\n\r\na\n") == std::string::npos && (n = recv(held, buf, sizeof buf, 0)) > 0;)
    first.append(buf, static_cast<size_t>(n));
  ASSERT_EQ(status_of(first), 200) << first;
  const int queued = connect_to(port);
  const auto t0 = Clock::now();
  const std::string out = roundtrip(port, get_request("/a"));
  EXPECT_EQ(status_of(out), 503) << out;
  EXPECT_LT(seconds_since(t0), 2.5);  // (not after the held connection's 5 s)
  close(held);
  close(queued);
}

TEST(HttpServer, HeadersPastTheLimitAreRefused) {
  HttpOptions o;
  o.max_header_bytes = 1024;
  auto s = serve(o);
  const int port = s->server->port();
  EXPECT_EQ(status_of(roundtrip(port, get_request("/a", "X-Pad: " + std::string(800, 'a') + "\r\n"))), 200);
  const std::string big = roundtrip(port, get_request("/a", "X-Pad: " + std::string(2000, 'a') + "\r\n"));
  EXPECT_TRUE(status_of(big) == 400 || status_of(big) == 431) << big;
  std::string many;
  for (int i = 0; i < 200; ++i) many += "X-" + std::to_string(i) + ": a\r\n";  // each line short
  EXPECT_TRUE(status_of(roundtrip(port, get_request("/a", many))) / 100 == 4);
  const std::string line = roundtrip(port, get_request("/a?" + std::string(2000, 'a')));
  EXPECT_EQ(status_of(line), 431) << line;
  EXPECT_EQ(s->calls, 1);
}

TEST(HttpServer, StopWithConnectionsHeldIsPromptAndFinal) {
  HttpOptions o;
  o.threads = 4;
  auto s = serve(o);
  const int port = s->server->port();
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(connect_to(port));  // silent: threads and queue
  const int slow = connect_to(port);
  send(slow, "GET /a HT", 9, MSG_NOSIGNAL);  // a request begun
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = Clock::now();
  s->server->stop();
  EXPECT_LT(seconds_since(t0), 2.5) << "stop() waited for the connections' timeouts (5 s)";
  EXPECT_EQ(connect_to(port), -1) << "the port is still open after stop()";
  EXPECT_EQ(s->calls, 0);
  s->server->stop();  // again: nothing
  for (int fd : held) close(fd);
  close(slow);
}

TEST(HttpServer, APortInUseFails) {
  auto s = serve({});
  HttpOptions o;
  o.port = s->server->port();
  std::unique_ptr<HttpServer> second;
  const Status st = HttpServer::create(o, &second);
  EXPECT_FALSE(st.ok()) << "a second server bound the same port (SO_REUSEPORT)";
  EXPECT_NE(st.message().find("cannot listen on 127.0.0.1:" + std::to_string(o.port)), std::string::npos)
      << st.message();
  EXPECT_EQ(status_of(roundtrip(s->server->port(), get_request("/a"))), 200);
  std::unique_ptr<HttpServer> unstarted;  // bound and never started: its destructor lets the port go
  HttpOptions any;
  ASSERT_TRUE(HttpServer::create(any, &unstarted).ok());
  const int p = unstarted->port();
  unstarted.reset();
  EXPECT_EQ(connect_to(p), -1);
}

TEST(HttpServer, TlsStartupErrorsNameTheFile) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl to make a certificate";
  const auto dir = std::filesystem::temp_directory_path() / ("fs_http_tls_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto pair = [&](const std::string& name) {
    const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " +
                            (dir / (name + ".key")).string() + " -out " + (dir / (name + ".crt")).string() +
                            " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  };
  pair("a");
  pair("b");
  auto error = [](const std::string& cert, const std::string& key) {
    HttpOptions o;
    o.tls_cert_file = cert;
    o.tls_key_file = key;
    std::unique_ptr<HttpServer> s;
    const Status st = HttpServer::create(o, &s);
    return st.ok() ? std::string("ok") : st.message();
  };
  const std::string a_crt = (dir / "a.crt").string(), a_key = (dir / "a.key").string();
  const std::string b_key = (dir / "b.key").string(), missing = (dir / "nope.pem").string();
  EXPECT_EQ(error(a_crt, a_key), "ok");
  EXPECT_NE(error(missing, a_key).find("TLS certificate " + missing), std::string::npos) << error(missing, a_key);
  EXPECT_NE(error(a_crt, missing).find("TLS key " + missing), std::string::npos) << error(a_crt, missing);
  EXPECT_NE(error(a_crt, b_key).find("does not match"), std::string::npos) << error(a_crt, b_key);
  EXPECT_NE(error(a_crt, "").find("both"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashserve::server::http
