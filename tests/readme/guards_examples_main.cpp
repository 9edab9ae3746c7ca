// docs/guards.md's embedding examples, run as written: their lines are the
// set-up of a daemon (.inc files cut out of guards.md at configure time).
// This program adds what they call on, starts it, and drives each over
// HTTP: an "order" with a 2 s Job-Deadline whose child "ship" must carry
// less than that and name it; a "quote" that fans out to three suppliers
// and answers with the first success; a "refund" that waits for a person's
// "approve" signal and answers with its payload. Exit 0 when both hold.
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include "hourglass/server/http_server.hpp"

namespace {

namespace http = boost::beast::http;

// One request on a fresh connection: the status and body.
std::pair<unsigned, std::string> send(std::uint16_t port, http::verb verb, const std::string& target,
                                      const std::string& body, const std::string& deadline = "") {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req(verb, target, 11);
  req.set(http::field::host, "127.0.0.1");
  if (verb == http::verb::post && target.find("/signals/") == std::string::npos) req.set("Prefer", "respond-async");
  if (!deadline.empty()) req.set("Job-Deadline", deadline);
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(s, buf, res);
  return {res.result_int(), res.body()};
}

// A string member of a flat JSON body ("" when absent).
std::string member(const std::string& json, const std::string& key) {
  const std::string start = "\"" + key + "\": \"";
  const auto at = json.find(start);
  if (at == std::string::npos) return "";
  const auto from = at + start.size();
  return json.substr(from, json.find('"', from) - from);
}

double number(const std::string& json, const std::string& key) {
  const std::string start = "\"" + key + "\": ";
  const auto at = json.find(start);
  return at == std::string::npos ? 1e18 : std::stod(json.substr(at + start.size()));
}

// The job once `done` says so, polled for up to 5 s; "" if it never did.
template <class Pred>
std::string poll(std::uint16_t port, const std::string& id, Pred done) {
  for (int i = 0; i < 500; ++i) {
    const auto [status, job] = send(port, http::verb::get, "/v1/jobs/" + id, "");
    if (status == 200 && done(job)) return job;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

bool order_example(std::uint16_t port) {
  const auto [status, accepted] = send(port, http::verb::post, "/v1/jobs/order", "17", "2S");
  if (status != 202) return std::fprintf(stderr, "order: %u %s\n", status, accepted.c_str()), false;
  const std::string order = member(accepted, "id");
  // The order's result is its child's id: the child names the order and has less than its 2 s.
  const std::string job = poll(port, order, [](const std::string& j) { return member(j, "state") == "ok"; });
  const std::string child = member(job, "result");
  const auto [cs, cj] = send(port, http::verb::get, "/v1/jobs/" + child, "");
  if (cs == 200 && member(cj, "parent") == order && number(cj, "deadline_at_ms") < 2000.0) return true;
  std::fprintf(stderr, "order %s: child %u %s\n", job.c_str(), cs, cj.c_str());
  return false;
}

bool quote_example(std::uint16_t port) {
  const auto [status, accepted] = send(port, http::verb::post, "/v1/jobs/quote", "", "5S");
  if (status != 202) return std::fprintf(stderr, "quote: %u %s\n", status, accepted.c_str()), false;
  const std::string done = poll(port, member(accepted, "id"),
                                [](const std::string& j) { return member(j, "state") == "ok"; });
  if (member(done, "result") == "quote from b") return true;
  std::fprintf(stderr, "quote: %s\n", done.c_str());
  return false;
}

bool refund_example(std::uint16_t port) {
  const auto [status, accepted] = send(port, http::verb::post, "/v1/jobs/refund", "order 17", "2S");
  if (status != 202) return std::fprintf(stderr, "refund: %u %s\n", status, accepted.c_str()), false;
  const std::string id = member(accepted, "id");
  const std::string waiting = poll(port, id, [](const std::string& j) { return member(j, "state") == "waiting"; });
  if (member(waiting, "waiting_for") != "signal:approve") {
    return std::fprintf(stderr, "refund never waited: %s\n", waiting.c_str()), false;
  }
  const auto [ss, signalled] = send(port, http::verb::post, "/v1/jobs/" + id + "/signals/approve", "by ana");
  if (ss != 200) return std::fprintf(stderr, "signal: %u %s\n", ss, signalled.c_str()), false;
  const std::string done = poll(port, id, [](const std::string& j) { return member(j, "state") == "ok"; });
  if (member(done, "result") == "refunded: by ana") return true;
  std::fprintf(stderr, "refund: %s\n", done.c_str());
  return false;
}

}  // namespace

int main() {
  hourglass::server::server_options o;
  o.listen = "127.0.0.1:0";
  o.log_level = "error";
  hourglass::server::http_server srv(o);
#include "guards_child_example.inc"
#include "guards_fan_in_example.inc"
#include "guards_signal_example.inc"
  // Supplier "a" fails, "b" quotes, "c" takes far longer than anyone waits.
  srv.add_handler("supplier", [](const hourglass::context& ctx, const hourglass::server::request_view& req) {
    if (req.body == "a") throw hourglass::server::handler_error(502, "no_stock", "supplier a has none");
    if (req.body == "c" && !ctx.sleep_for(std::chrono::seconds(60))) ctx.check();
    return hourglass::server::handler_result{"quote from " + std::string(req.body), "text/plain"};
  });
  srv.add_handler("ship", [](const hourglass::context&, const hourglass::server::request_view& req) {
    return hourglass::server::handler_result{"shipped " + std::string(req.body), "text/plain"};
  });
  srv.start();
  const bool ok = order_example(srv.port()) && quote_example(srv.port()) && refund_example(srv.port());
  srv.drain();
  return ok ? 0 : 1;
}
