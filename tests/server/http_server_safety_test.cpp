// Safe defaults: auth, 404/405/413/431, slow clients, the connection bound,
// and refusing to listen openly without a token.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <stdexcept>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

TEST(HttpServerSafety, BearerTokenIsRequiredExceptForHealthz) {
  token_file tok("s3cret-token-2026");
  server_options o = test_options();
  o.auth_token_file = tok.path();
  test_server srv(o);
  EXPECT_EQ(get(srv.port(), "/healthz").status, 200u);
  const reply none = post(srv.port(), "/v1/jobs/echo", "x");
  EXPECT_EQ(none.status, 401u);
  EXPECT_EQ(none.header("www-authenticate"), "Bearer");
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "x", {{"Authorization", "Bearer s3cret-tokem"}}).status, 401u);
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "x", {{"Authorization", "Bearer s3cret"}}).status, 401u);
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "x", {{"Authorization", "Basic s3cret-token-2026"}}).status, 401u);
  EXPECT_EQ(get(srv.port(), "/metrics").status, 401u);
  EXPECT_EQ(get(srv.port(), "/readyz").status, 401u);
  EXPECT_EQ(post(srv.port(), "/v1/jobs/nope", "x").status, 401u) << "nothing is revealed before auth";
  const reply ok = post(srv.port(), "/v1/jobs/echo", "x", {{"Authorization", "Bearer s3cret-token-2026"}});
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.body, "x");
  EXPECT_EQ(get(srv.port(), "/metrics", {{"Authorization", "Bearer s3cret-token-2026"}}).status, 200u);
  EXPECT_EQ(srv.handler("echo").admitted, 1u) << "refused requests never reach the queue";
}

// A one-byte token is guessed, not stolen; an admin token equal to the
// access token is no separate key. Both refuse to start.
TEST(HttpServerSafety, ATokenShorterThan16OrAnAdminTokenEqualToTheAccessTokenIsRefusedAtStart) {
  token_file short_token("fifteen-chars-x");
  server_options o = test_options();
  o.auth_token_file = short_token.path();
  http_server too_short(o);
  EXPECT_THROW(too_short.start(), std::runtime_error);
  token_file just_long_enough("sixteen-chars-xx");
  o.auth_token_file = just_long_enough.path();
  http_server fine(o);
  EXPECT_NO_THROW(fine.start());
  o.admin_token_file = just_long_enough.path();
  http_server same(o);
  EXPECT_THROW(same.start(), std::runtime_error);
}

TEST(HttpServerSafety, NonLoopbackWithoutATokenIsRefused) {
  server_options o = test_options();
  o.listen = "0.0.0.0:0";
  EXPECT_THROW(http_server{o}, std::invalid_argument);
  o.allow_unauthenticated = true;
  EXPECT_NO_THROW(http_server{o});
  token_file tok("t");
  o.allow_unauthenticated = false;
  o.auth_token_file = tok.path();
  EXPECT_NO_THROW(http_server{o});
}

TEST(HttpServerSafety, UnknownPathsAndHandlersAre404) {
  test_server srv;
  EXPECT_EQ(get(srv.port(), "/").status, 404u);
  EXPECT_EQ(get(srv.port(), "/v1/jobs/").status, 404u);
  EXPECT_EQ(post(srv.port(), "/v1/jobs/a/b", "").status, 404u);
  const reply r = post(srv.port(), "/v1/jobs/no-such-handler", "x");
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(json_string(r.body, "error"), "not_found");
  EXPECT_EQ(post(srv.port(), "/v1/jobs/..%2F..%2Fetc", "x").status, 404u);
}

TEST(HttpServerSafety, WrongMethodsAre405WithAllow) {
  test_server srv;
  const reply put = client(srv.port()).request("PUT", "/v1/jobs/echo", "x");
  EXPECT_EQ(put.status, 405u);
  EXPECT_EQ(put.header("allow"), "GET, POST, DELETE");
  const reply m = post(srv.port(), "/metrics", "x");
  EXPECT_EQ(m.status, 405u);
  EXPECT_EQ(m.header("allow"), "GET, HEAD");
  EXPECT_EQ(client(srv.port()).request("DELETE", "/healthz").status, 405u);
  EXPECT_EQ(client(srv.port()).request("HEAD", "/healthz").status, 200u);
}

// Sends only the headers of a POST announcing `content_length` bytes; returns
// what came back and whether the server closed the connection.
std::pair<std::string, bool> answer_to_headers_only(std::uint16_t port, std::uint64_t content_length) {
  raw_socket s(port);
  EXPECT_TRUE(s.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: " +
                     std::to_string(content_length) + "\r\n\r\n"));
  return s.read_until_close(3s);
}

TEST(HttpServerSafety, OversizedBodyIs413BeforeTheBodyIsRead) {
  server_options o = test_options();
  o.max_body = 1000;
  test_server srv(o);
  // Only the headers are sent: the answer must come without the body.
  const auto [resp, closed] = answer_to_headers_only(srv.port(), 1000000);
  EXPECT_NE(resp.find("HTTP/1.1 413"), std::string::npos) << resp;
  EXPECT_TRUE(closed) << "the unread body is not waited for";
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", std::string(1000, 'a')).status, 200u);
  EXPECT_EQ(srv.handler("echo").admitted, 1u);
}

TEST(HttpServerSafety, OversizedChunkedBodyIs413) {
  server_options o = test_options();
  o.max_body = 1000;
  test_server srv(o);
  raw_socket s(srv.port());
  std::string req = "POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) req += "200\r\n" + std::string(512, 'a') + "\r\n";
  req += "0\r\n\r\n";
  ASSERT_TRUE(s.send(req));
  const auto [resp, closed] = s.read_until_close(3s);
  EXPECT_NE(resp.find("HTTP/1.1 413"), std::string::npos) << resp;
}

// Regression: Beast's default 1 MiB body limit fired while the
// headers were parsed, so a large Content-Length got 400 whatever --max-body said.
TEST(HttpServerSafety, AContentLengthAbove1MiBIsJudgedByMaxBody) {
  {
    server_options o = test_options();
    o.max_body = 4096;
    test_server srv(o);
    const auto [resp, closed] = answer_to_headers_only(srv.port(), 10000000);
    EXPECT_NE(resp.find("HTTP/1.1 413"), std::string::npos) << resp;
  }
  {
    server_options o = test_options();
    o.max_body = 4u << 20;
    test_server srv(o);
    const std::string body(2u << 20, 'b');
    const reply r = post(srv.port(), "/v1/jobs/echo", body, {{"Request-Timeout", "20S"}});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body.size(), body.size());
  }
}

// Regression: a malformed chunked body closed the connection without an
// answer, so the client could not tell a bad request from a crash.
TEST(HttpServerSafety, AMalformedChunkedBodyIs400) {
  const char* bodies[] = {
      "zz\r\nabc\r\n0\r\n\r\n",  // not a chunk size
      "3\r\nabcXX0\r\n\r\n",     // no CRLF after the chunk data
  };
  test_server srv;
  for (const char* body : bodies) {
    raw_socket s(srv.port());
    ASSERT_TRUE(s.send(
        std::string("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n") + body));
    const auto [resp, closed] = s.read_until_close(3s);
    EXPECT_NE(resp.find("HTTP/1.1 400"), std::string::npos) << body << ": " << resp;
    EXPECT_NE(resp.find("bad_request"), std::string::npos) << resp;
    EXPECT_TRUE(closed);
  }
  EXPECT_EQ(srv.handler("echo").admitted, 0u);
}

TEST(HttpServerSafety, HeadersOver8KiBAre431) {
  test_server srv;
  const reply big = post(srv.port(), "/v1/jobs/echo", "x", {{"X-Padding", std::string(9000, 'p')}});
  ASSERT_TRUE(big.ok) << big.error;
  EXPECT_EQ(big.status, 431u);
  const reply fits = post(srv.port(), "/v1/jobs/echo", "x", {{"X-Padding", std::string(7000, 'p')}});
  EXPECT_EQ(fits.status, 200u);
}

TEST(HttpServerSafety, MalformedRequestsAre400) {
  test_server srv;
  raw_socket s(srv.port());
  ASSERT_TRUE(s.send("THIS IS NOT HTTP\r\n\r\n"));
  const auto [resp, closed] = s.read_until_close(3s);
  EXPECT_NE(resp.find("HTTP/1.1 400"), std::string::npos) << resp;
  EXPECT_TRUE(closed);
}

TEST(HttpServerSafety, ASlowHeaderClientIsDisconnectedWhileOthersAreServed) {
  server_options o = test_options();
  o.header_timeout = std::chrono::milliseconds(300);
  test_server srv(o);
  const auto t0 = std::chrono::steady_clock::now();  // before the header timeout starts
  raw_socket slow(srv.port());
  ASSERT_TRUE(slow.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\n"));  // ...and never the rest
  auto closed = std::async(std::launch::async, [&] { return slow.read_until_close(5s); });
  client other(srv.port());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(other.post("/v1/jobs/echo", "x").status, 200u);
  const auto [resp, was_closed] = closed.get();
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(was_closed) << "the server hangs up on a slow client";
  EXPECT_TRUE(resp.empty()) << resp;
  EXPECT_GE(waited, 250ms);
  EXPECT_LT(waited, 2s);
}

TEST(HttpServerSafety, ASlowBodyClientIsDisconnected) {
  server_options o = test_options();
  o.body_timeout = std::chrono::milliseconds(300);
  test_server srv(o);
  raw_socket slow(srv.port());
  ASSERT_TRUE(slow.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\nonly a little"));
  const auto [resp, closed] = slow.read_until_close(3s);
  EXPECT_TRUE(closed);
  EXPECT_EQ(srv.handler("echo").admitted, 0u);
}

TEST(HttpServerSafety, OpenConnectionsAreBounded) {
  server_options o = test_options();
  o.max_connections = 2;
  test_server srv(o);
  client a(srv.port()), b(srv.port());
  ASSERT_EQ(a.post("/v1/jobs/echo", "a").status, 200u);
  ASSERT_EQ(b.post("/v1/jobs/echo", "b").status, 200u);
  raw_socket third(srv.port());
  third.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n");
  const auto [resp, closed] = third.read_until_close(3s);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(resp.empty()) << resp;
  EXPECT_EQ(a.post("/v1/jobs/echo", "a").status, 200u) << "open connections keep working";
  a.close();
  ASSERT_TRUE(wait_until([&] { return get(srv.port(), "/healthz").status == 200u; }));
}

// A connection accepted elsewhere (here one end of a socketpair) is served
// like an accepted one, under the same limits.
TEST(HttpServerSafety, AnAdoptedConnectionIsServedLikeAnAcceptedOne) {
  test_server srv;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  srv.get().adopt_connection(sv[0]);
  const std::string req =
      "POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello"
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(sv[1], req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::recv(sv[1], buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(sv[1]);
  EXPECT_EQ(got.rfind("HTTP/1.1 200 OK", 0), 0u) << got;
  EXPECT_NE(got.find("hello"), std::string::npos) << got;
  EXPECT_NE(got.find("ok\n"), std::string::npos) << got;
  EXPECT_EQ(srv.handler("echo").finished_ok, 1u);
  server_options o = test_options();
  http_server not_started(o);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  EXPECT_THROW(not_started.adopt_connection(sv[0]), std::logic_error);
  ::close(sv[1]);
}

// Responses and stream chunks leave when written (TCP_NODELAY, as nginx
// sets it): Nagle would hold a chunk behind the client's delayed ACK of the
// one before. Read on a duplicate of the descriptor the daemon adopts.
TEST(HttpServerSafety, ConnectionsAreServedWithNagleOff) {
  test_server srv;
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int client_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(client_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int served = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(served, 0);
  const int same_socket = ::dup(served);
  int nodelay = -1;
  socklen_t size = sizeof nodelay;
  ASSERT_EQ(::getsockopt(same_socket, IPPROTO_TCP, TCP_NODELAY, &nodelay, &size), 0);
  EXPECT_EQ(nodelay, 0) << "a fresh socket has Nagle on";
  srv.get().adopt_connection(served);
  ASSERT_EQ(::getsockopt(same_socket, IPPROTO_TCP, TCP_NODELAY, &nodelay, &size), 0);
  EXPECT_NE(nodelay, 0);
  ::close(same_socket);
  ::close(client_fd);
  ::close(listener);
}

TEST(HttpServerSafety, KeepAliveAndPipeliningWork) {
  test_server srv;
  raw_socket s(srv.port());
  ASSERT_TRUE(
      s.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\none"
             "POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\ntwo"
             "GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
  const auto [resp, closed] = s.read_until_close(3s);
  const auto one = resp.find("one");
  const auto two = resp.find("two");
  EXPECT_NE(one, std::string::npos) << resp;
  EXPECT_NE(two, std::string::npos) << resp;
  EXPECT_LT(one, two);
  EXPECT_NE(resp.find("ok\n"), std::string::npos);
  EXPECT_TRUE(closed);
}

TEST(HttpServerSafety, ExpectContinueIsHonoured) {
  test_server srv;
  raw_socket s(srv.port());
  ASSERT_TRUE(
      s.send("POST /v1/jobs/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_NE(s.read_until("100 Continue", 3s).find("HTTP/1.1 100 Continue"), std::string::npos);
  ASSERT_TRUE(s.send("hello"));
  EXPECT_NE(s.read_until("hello", 3s).find("hello"), std::string::npos);
}

TEST(HttpServerSafety, MetricsAreExposedInPrometheusText) {
  test_server srv;
  post(srv.port(), "/v1/jobs/echo", "x");
  const reply m = get(srv.port(), "/metrics");
  EXPECT_EQ(m.status, 200u);
  EXPECT_NE(m.header("content-type").find("text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(m.body.find("hourglass_jobs_finished_total{handler=\"echo\",outcome=\"ok\"} 1"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("hourglass_jobs_admitted_total{handler=\"sleep\"} 0"), std::string::npos)
      << "every registered handler is listed";
  EXPECT_NE(m.body.find("hourglass_queue_depth"), std::string::npos);
}

}  // namespace
}  // namespace hourglass::server::testing
