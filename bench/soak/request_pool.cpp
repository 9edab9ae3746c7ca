#include "soak/request_pool.hpp"

#include <boost/asio/connect.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>

namespace hourglass::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct request_pool::connection {
  explicit connection(asio::io_context& io) : stream(io) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::string_body> req;
  http::response<http::string_body> res;
  callback done;
  bool connected = false;
  bool busy = false;
};

request_pool::request_pool(asio::io_context& io, tcp::resolver::results_type endpoints, std::string host_header,
                           std::size_t connections, duration timeout)
    : io_(io), endpoints_(std::move(endpoints)), host_header_(std::move(host_header)), timeout_(timeout) {
  for (std::size_t i = 0; i < std::max<std::size_t>(connections, 1); ++i) {
    connections_.push_back(std::make_unique<connection>(io_));
  }
}

request_pool::~request_pool() = default;

void request_pool::submit(pool_request request, callback done) {
  waiting_.push_back({std::move(request), std::move(done)});
  dispatch();
}

void request_pool::dispatch() {
  for (auto& c : connections_) {
    if (waiting_.empty()) return;
    if (c->busy) continue;
    queued q = std::move(waiting_.front());
    waiting_.pop_front();
    c->busy = true;
    ++busy_;
    c->done = std::move(q.done);
    c->req = {};
    c->req.method(q.request.method);
    c->req.target(q.request.target);
    c->req.version(11);
    c->req.set(http::field::host, host_header_);
    for (const auto& [name, value] : q.request.headers) c->req.set(name, value);
    if (q.request.method != http::verb::get || !q.request.body.empty()) {
      c->req.body() = std::move(q.request.body);
      c->req.prepare_payload();
    }
    send(*c);
  }
}

void request_pool::send(connection& c) {
  c.stream.expires_after(timeout_);
  if (c.connected) return write(c);
  c.stream.async_connect(endpoints_, [this, &c](beast::error_code ec, const tcp::endpoint&) {
    if (ec) return finish(c, {false, 0, {}, {}, "connect: " + ec.message()});
    c.stream.socket().set_option(tcp::no_delay(true));
    c.connected = true;
    write(c);
  });
}

void request_pool::write(connection& c) {
  c.res = {};
  http::async_write(c.stream, c.req, [this, &c](beast::error_code ec, std::size_t) {
    if (ec) return finish(c, {false, 0, {}, {}, "write: " + ec.message()});
    http::async_read(c.stream, c.buffer, c.res, [this, &c](beast::error_code ec2, std::size_t) {
      if (ec2) return finish(c, {false, 0, {}, {}, "read: " + ec2.message()});
      pool_answer a;
      a.answered = true;
      a.status = c.res.result_int();
      a.location = std::string(c.res[http::field::location]);
      a.body = std::move(c.res.body());
      if (!c.res.keep_alive()) c.connected = false;
      finish(c, std::move(a));
    });
  });
}

void request_pool::finish(connection& c, pool_answer answer) {
  if (!answer.answered || !c.connected) {
    beast::error_code ignored;
    c.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c.stream.close();
    c.connected = false;
    c.buffer.clear();
  }
  c.busy = false;
  --busy_;
  callback done = std::move(c.done);
  c.done = nullptr;
  done(std::move(answer));
  dispatch();
}

void request_pool::close() {
  std::deque<queued> dropped;
  dropped.swap(waiting_);
  for (auto& q : dropped) q.done({false, 0, {}, {}, "pool closed"});
  for (auto& c : connections_) {
    // A busy connection's handler runs with operation_aborted and reports it.
    if (c->connected || c->busy) c->stream.close();
    if (!c->busy) c->connected = false;
  }
}

}  // namespace hourglass::bench
