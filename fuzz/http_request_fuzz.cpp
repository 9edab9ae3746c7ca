// A whole HTTP/1.1 byte stream through the daemon's real request path:
// parser, limits, framing, routing, auth, budget headers, handler input.
// Each input goes down one end of a socketpair whose other end the server
// adopts (http_server::adopt_connection), followed by a closing request to
// /healthz; the fuzzer reads every answer until the server hangs up.
//
// Properties:
//  - the server always hangs up (every path ends in an answer or a timeout);
//  (HEAD is turned into an unknown method: see below.)
//  - what comes back parses as a sequence of HTTP/1.1 responses;
//  - a request refused with a 4xx enqueues nothing: the jobs admitted while
//    this input was served (less later attempts of async jobs answered
//    before) are exactly the answers that are job outcomes (2xx with
//    Server-Timing, or an error body naming an outcome that only an
//    admitted job has), plus the 202s of async jobs (not delayed ones,
//    whose first attempt is admitted when due, after the answer, nor a
//    repeated Idempotency-Key's, which names the job it admitted before).
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/parse.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "hourglass/server/http_server.hpp"

namespace {

namespace http = boost::beast::http;
using namespace std::chrono_literals;

constexpr const char* token = "fuzz-token-0123456";

hourglass::server::http_server& server() {
  static hourglass::server::http_server* s = [] {
    const std::string token_path = "/tmp/hourglass-fuzz-token-0123456-" + std::to_string(::getpid());
    std::ofstream(token_path) << token << "\n";
    hourglass::server::server_options o;
    o.listen = "127.0.0.1:0";
    o.auth_token_file = token_path;
    o.workers = 2;
    o.io_threads = 1;
    o.log_level = "off";
    // Every exec bounded: jobs, and requests that never complete. Jobs get
    // 500 us (admitted down to 100 us left): a `spin` burns its whole budget
    // in a loop whose every comparison libFuzzer hooks, and at 2 ms that was
    // still a third of the run's CPU (perf). Timeouts stay at 5 ms so a
    // preempted fuzzer thread does not see its own connection time out.
    o.default_budget = 500us;
    o.max_budget = 500us;
    o.min_budget = 100us;
    o.header_timeout = 5ms;
    o.body_timeout = 5ms;
    o.idle_timeout = 5ms;
    // Not the writes: pipelined listings outgrow the socket's buffer, and a
    // fuzzer thread preempted for 5 ms while the server waited to write cut
    // a response short (seen under load, after 1.3 M inputs). The reader
    // here always reads: a write never waits on it for long.
    o.write_timeout = 10s;
    o.max_body = 64 * 1024;
    o.allowed_hosts = {"f"};  // the corpus's Host (others are refused 421, as a rebound name is)
    o.async_ttl = 1s;
    auto* srv = new hourglass::server::http_server(o);  // lives for the process
    srv->start();
    return srv;
  }();
  return *s;
}

// Jobs admitted for a request answered now: every handler's admissions
// but the attempts the async store submitted after an answer (a retry, a
// delayed start, a run resumed after a wait, a child job: admitted_later),
// which belong to an earlier answer. One counter each (admitted_answered):
// admitted less a count of the later ones, read as two, once caught a
// later admission half done (after 650 K inputs on a loaded machine). Every registered handler counts: a fixed list of
// names missed the built-ins added after it (fanout, approval). The
// counters are looked up once: a whole metrics snapshot (every histogram)
// per input cost a third of the run time.
std::uint64_t admitted() {
  static const auto handlers = [] {
    hourglass::metrics& stats = server().jobs().stats();
    std::vector<const hourglass::handler_metrics*> h;
    for (const hourglass::handler_snapshot& s : stats.snapshot().handlers) h.push_back(&stats.handler(s.name));
    FUZZ_CHECK(h.size() >= 7);  // the built-ins at least
    return h;
  }();
  std::uint64_t n = 0;
  for (const auto* h : handlers) n += h->admitted_answered.value();
  return n;
}

std::string string_field(const boost::json::object& o, const char* key) {
  const auto* f = o.if_contains(key);
  return f != nullptr && f->is_string() ? std::string(f->as_string()) : std::string();
}

// Every async job id the server handed out in this process. A GET or DELETE
// of one answers 200 with the job's Server-Timing: a lookup, not a new job,
// even when the id came from an earlier input (the fuzzer learns ids from
// the store's comparisons: the first long run found exactly that).
std::set<std::string>& async_ids() {
  static std::set<std::string> ids;
  return ids;
}

// Whether an answer is the outcome of a job admitted for it (and not a
// refusal, or a lookup of an async job). A 202 without Server-Timing is a
// DELETE of a running async job; with it, an async job just admitted.
bool is_job_outcome(const http::response<http::string_body>& res) {
  const unsigned status = res.result_int();
  // Neither a length nor chunked: a stream's answer to HTTP/1.0, whose body
  // ends with the connection (every other answer has a Content-Length).
  if (!res.has_content_length() && !res.chunked()) {
    FUZZ_CHECK(status == 200);
    return true;
  }
  if (res.find("Server-Timing") == res.end()) return false;  // routing, limits, auth: never a job
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(res.body(), ec);
  const boost::json::object* o = !ec && v.is_object() ? &v.as_object() : nullptr;
  if (status == 202) {  // async: admitted, unless delayed (admitted when due, later) or a repeated Idempotency-Key
    FUZZ_CHECK(o != nullptr && !string_field(*o, "id").empty());
    async_ids().insert(string_field(*o, "id"));
    const boost::json::value* duplicate = o->if_contains("duplicate");
    return string_field(*o, "state") != "scheduled" &&
           !(duplicate != nullptr && duplicate->is_bool() && duplicate->as_bool());
  }
  // A stream's Server-Timing is a trailer (Beast's parser adds trailers to
  // the fields): a 2xx stream is a job's outcome like any other 2xx.
  if (status / 100 == 2) {
    // A handler's own answer, unless it is an async job's record (an echo
    // would have to carry an id the server gave out, in our JSON shape).
    const bool lookup = o != nullptr && o->contains("state") && async_ids().contains(string_field(*o, "id"));
    return !lookup;
  }
  // Errors with Server-Timing carry our JSON body: refusals name themselves.
  FUZZ_CHECK(o != nullptr);
  if (string_field(*o, "outcome") == "rejected" || string_field(*o, "outcome") == "invalid") {
    return false;  // 503 queue_full, 400
  }
  if (string_field(*o, "stage") == "admission") return false;  // 504: too little budget to admit
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto& srv = server();
  int sv[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  const std::uint64_t before = admitted();
  std::string out(reinterpret_cast<const char*>(data), size);
  // The answer to HEAD has a Content-Length and no body: from the bytes alone
  // it cannot be told from the next answer. HEAD is not fuzzed here (it is
  // only routed to /healthz, /readyz and /metrics, never to a job).
  for (std::size_t at; (at = out.find("HEAD")) != std::string::npos;) out[at + 3] = 'X';
  out += "\r\nGET /healthz HTTP/1.1\r\nHost: f\r\nConnection: close\r\n\r\n";
  // The input is in the socket before the server adopts it (as much as the
  // socket takes at once: all of it, in practice): else a fuzzer thread that
  // is preempted lets the 5 ms header timeout fire on an empty connection.
  std::size_t sent = 0;
  if (const ssize_t n = ::send(sv[1], out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT); n > 0) {
    sent = static_cast<std::size_t>(n);
  }
  srv.adopt_connection(sv[0]);
  // The server may stop reading (a refused request): what is not taken is dropped.
  while (sent < out.size()) {
    pollfd p{sv[1], POLLOUT, 0};
    if (::poll(&p, 1, 2000) <= 0) break;
    const ssize_t n = ::send(sv[1], out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string in;
  // Ten silent seconds in a row fail the input (every server timeout here is
  // 5 ms). Counted in empty polls, not by the wall clock, so a fuzzer that
  // was stopped (SIGSTOP, a loaded machine) does not blame the server.
  for (int silent_polls = 0;;) {
    pollfd p{sv[1], POLLIN, 0};
    FUZZ_CHECK(silent_polls < 10 && "the server always hangs up");
    if (::poll(&p, 1, 1000) <= 0) {
      ++silent_polls;
      continue;
    }
    silent_polls = 0;
    char buf[16384];
    const ssize_t n = ::recv(sv[1], buf, sizeof buf, 0);
    if (n <= 0) break;
    in.append(buf, static_cast<std::size_t>(n));
  }
  ::close(sv[1]);

  std::uint64_t outcomes = 0;
  std::string answers;  // each answer's status, and whether it counted: what a failure prints
  boost::beast::flat_buffer buffer;
  if (!in.empty()) {  // nothing at all: a request that timed out and swallowed the last one
    auto b = buffer.prepare(in.size());
    std::memcpy(b.data(), in.data(), in.size());
    buffer.commit(in.size());
  }
  while (buffer.size() > 0) {
    http::response_parser<http::string_body> p;
    p.body_limit(boost::none);
    p.eager(true);
    boost::system::error_code ec;
    const std::size_t used = p.put(buffer.data(), ec);
    buffer.consume(used);
    // The server hung up after this: a body delimited by the close ends here.
    if ((!ec || ec == http::error::need_more) && !p.is_done() && buffer.size() == 0 && p.is_header_done() &&
        !p.get().has_content_length() && !p.get().chunked()) {
      ec = {};
      p.put_eof(ec);
    }
    if (ec == http::error::need_more) {
      FUZZ_CHECK(false && "a response cut short");
    }
    FUZZ_CHECK(!ec);
    if (!p.is_done()) {
      FUZZ_CHECK(buffer.size() == 0);
      FUZZ_CHECK(false && "a response cut short");
    }
    if (p.get().result_int() == 100) continue;  // 100 Continue, then the real answer
    const bool outcome = is_job_outcome(p.get());
    if (outcome) ++outcomes;
    answers += std::to_string(p.get().result_int()) + (outcome ? "* " : " ");
  }
  // Jobs are counted at admission, before their answer is written.
  if (const std::uint64_t jobs = admitted() - before; jobs != outcomes) {
    std::fprintf(stderr, "admitted %llu, answered as job outcomes (*) %llu: %s\n",
                 static_cast<unsigned long long>(jobs), static_cast<unsigned long long>(outcomes), answers.c_str());
  }
  FUZZ_CHECK(admitted() - before == outcomes);
  return 0;
}
