// The dashboard's files at /ui/: served from the binary without a token
// (they hold no data), with a strict Content-Security-Policy, revalidated
// by etag; and the guard that keeps other sites' pages from changing
// anything (Origin).
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

struct HttpServerUi : ::testing::Test {
  server_options with_token() {
    server_options o = test_options();
    o.auth_token_file = tok.path();
    return o;
  }
  token_file tok{"s3cret-token-2026"};
  test_server srv{with_token()};
};

TEST_F(HttpServerUi, ThePageAndEveryFileItNamesAreServedWithoutATokenUnderAStrictPolicy) {
  const reply page = get(srv.port(), "/ui/");
  ASSERT_EQ(page.status, 200u) << page.body;
  EXPECT_EQ(page.header("content-type"), "text/html; charset=utf-8");
  const std::string csp = page.header("content-security-policy");
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("connect-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << "no inline script or style, no eval: " << csp;
  EXPECT_EQ(page.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(page.header("referrer-policy"), "no-referrer");

  // Every src= and href= of the page is a file of ours: nothing from another host.
  std::set<std::string> named;
  const std::regex ref(R"re((?:src|href)="([^"#]+)")re");
  for (std::sregex_iterator it(page.body.begin(), page.body.end(), ref), end; it != end; ++it) named.insert((*it)[1]);
  EXPECT_EQ(named, (std::set<std::string>{"app.css", "app.js", "icon.svg"}));
  for (const std::string& name : named) {
    const reply f = get(srv.port(), "/ui/" + name);
    EXPECT_EQ(f.status, 200u) << name;
    EXPECT_FALSE(f.body.empty()) << name;
    EXPECT_FALSE(f.header("etag").empty()) << name;
  }
  EXPECT_EQ(get(srv.port(), "/ui/app.js").header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(get(srv.port(), "/ui/app.css").header("content-type"), "text/css; charset=utf-8");
  EXPECT_EQ(get(srv.port(), "/ui/icon.svg").header("content-type"), "image/svg+xml");
  EXPECT_EQ(get(srv.port(), "/v1/queues").status, 401u) << "the data behind the page still needs the token";
}

TEST_F(HttpServerUi, AnEtagThatMatchesIsNotModifiedAndOthersAreNot) {
  const reply first = get(srv.port(), "/ui/app.js");
  const std::string etag = first.header("etag");
  ASSERT_EQ(etag.size(), 42u) << "a quoted SHA-1: " << etag;
  const reply again = get(srv.port(), "/ui/app.js", {{"If-None-Match", etag}});
  EXPECT_EQ(again.status, 304u);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(get(srv.port(), "/ui/app.js", {{"If-None-Match", "\"stale\""}}).status, 200u);
  EXPECT_NE(get(srv.port(), "/ui/app.css").header("etag"), etag) << "each file its own";
}

TEST_F(HttpServerUi, OtherPathsAreNotFoundAndTheBareFolderRedirects) {
  EXPECT_EQ(get(srv.port(), "/ui/nope.js").status, 404u);
  EXPECT_EQ(get(srv.port(), "/ui/../metrics").status, 404u);
  const reply bare = get(srv.port(), "/ui");
  EXPECT_EQ(bare.status, 308u);
  EXPECT_EQ(bare.header("location"), "/ui/");
  EXPECT_EQ(post(srv.port(), "/ui/", "x").status, 405u);
}

TEST_F(HttpServerUi, AChangeFromAnotherSitesPageIsRefusedBeforeItIsRead) {
  const headers auth = {{"Authorization", "Bearer s3cret-token-2026"}};
  headers evil = auth;
  evil.emplace_back("Origin", "http://evil.example");
  const reply refused = post(srv.port(), "/v1/jobs/echo", "x", evil);
  EXPECT_EQ(refused.status, 403u);
  EXPECT_EQ(json_string(refused.body, "error"), "cross_origin");
  EXPECT_EQ(srv.handler("echo").admitted, 0u) << "nothing of it ran";

  headers own = auth;
  own.emplace_back("Origin", "http://127.0.0.1:" + std::to_string(srv.port()));
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "x", own).status, 200u) << "the dashboard's own requests";
  EXPECT_EQ(post(srv.port(), "/v1/jobs/echo", "x", auth).status, 200u) << "no Origin: not a browser page";
  EXPECT_EQ(get(srv.port(), "/v1/queues", evil).status, 200u) << "reads change nothing (and CORS keeps them unread)";
}

// DNS rebinding: a page on evil.example whose name now resolves to
// 127.0.0.1 sends its own name as Host, and a matching Origin. Refused 421
// before anything runs, reads and the dashboard too; the loopback names and
// addresses, and the names allowed with --allowed-host, are served.
TEST(HttpServerHosts, ARequestForAnotherNameIsMisdirectedBeforeAnythingRuns) {
  server_options o = test_options();
  o.allowed_hosts = {"hourglass.internal"};
  test_server srv(o);
  const std::string port = std::to_string(srv.port());
  const auto ask = [&](const std::string& request) {
    raw_socket s(srv.port());
    EXPECT_TRUE(s.send(request));
    return s.read_until_close(5s).first;
  };
  const std::string rebound = ask("POST /v1/jobs/echo HTTP/1.1\r\nHost: evil.example:" + port +
                                  "\r\nOrigin: http://evil.example:" + port +
                                  "\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx");
  EXPECT_EQ(rebound.rfind("HTTP/1.1 421", 0), 0u) << rebound;
  EXPECT_NE(rebound.find("misdirected_request"), std::string::npos) << rebound;
  EXPECT_EQ(srv.handler("echo").admitted, 0u) << "nothing of it ran";
  for (const std::string path : {"/v1/jobs", "/ui/", "/healthz", "/metrics"}) {
    const std::string read = ask("GET " + path + " HTTP/1.1\r\nHost: evil.example:" + port +
                                 "\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(read.rfind("HTTP/1.1 421", 0), 0u) << path << ": " << read;
  }
  const std::string twice = ask(
      "GET /healthz HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(twice.rfind("HTTP/1.1 421", 0), 0u) << "two Hosts: " << twice;
  for (const std::string& host :
       {"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "hourglass.internal:" + port}) {
    const std::string served = ask("POST /v1/jobs/echo HTTP/1.1\r\nHost: " + host + "\r\nOrigin: http://" + host +
                                   "\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx");
    EXPECT_EQ(served.rfind("HTTP/1.1 200", 0), 0u) << host << ": " << served;
    const std::string page = ask("GET /ui/ HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(page.rfind("HTTP/1.1 200", 0), 0u) << "the dashboard on " << host;
  }
  EXPECT_EQ(srv.handler("echo").admitted, 4u);
}

// A sync echo answers with the caller's Content-Type: as text/html on the
// dashboard's origin it would be a page anyone could write. Every API answer
// forbids sniffing and, by its policy, running, loading or framing anything;
// the dashboard's files keep their own policy.
TEST(HttpServerApiHeaders, NoAnswerButTheDashboardsCanBeAPage) {
  test_server srv;
  const reply page = post(srv.port(), "/v1/jobs/echo", "<script>alert(1)</script>", {{"Content-Type", "text/html"}});
  ASSERT_EQ(page.status, 200u);
  EXPECT_EQ(page.header("content-type"), "text/html");
  EXPECT_EQ(page.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(page.header("content-security-policy"), "default-src 'none'; frame-ancestors 'none'; sandbox");
  for (const char* path : {"/v1/jobs", "/v1/queues", "/metrics", "/healthz", "/v1/jobs/nope"}) {
    const reply r = get(srv.port(), path);
    EXPECT_EQ(r.header("x-content-type-options"), "nosniff") << path;
    EXPECT_NE(r.header("content-security-policy").find("sandbox"), std::string::npos) << path;
  }
  const reply ui = get(srv.port(), "/ui/");
  EXPECT_NE(ui.header("content-security-policy").find("script-src 'self'"), std::string::npos)
      << "the dashboard's own: " << ui.header("content-security-policy");
}

}  // namespace
}  // namespace hourglass::server::testing
