#include "soak/misbehaving_client.hpp"

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <utility>
#include <vector>

#include "hourglass/budget_codec.hpp"
#include "soak/process_stats.hpp"

namespace hourglass::bench {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using namespace std::chrono_literals;

namespace {

constexpr auto drip_every = 500ms;
constexpr auto abandon_after = 20ms;
constexpr auto daemon_side_every = 1s;
constexpr int tcp_established = 1;
// Eight echo jobs of 1 MB each: their answers are more than a socket's send buffer takes
// (at most 4 MiB by default), so the daemon's write stalls and its --write-timeout must cut
// the client off. (Pipelined GET /metrics would do it too, but its ~12 KB pages are served
// from a cache for --metrics-cache, so the test would depend on that setting.)
constexpr int never_reader_requests = 8;
constexpr std::size_t never_reader_body = 1'000'000;  // under the default --max-body, 1 MiB

const std::string& echo_body() {
  static const std::string body(never_reader_body, 'x');
  return body;
}

}  // namespace

const char* to_string(misbehaving_kind k) noexcept {
  switch (k) {
    case misbehaving_kind::header_trickle: return "header_trickle";
    case misbehaving_kind::body_trickle: return "body_trickle";
    case misbehaving_kind::never_read: return "never_read";
    case misbehaving_kind::abandon: return "abandon";
  }
  return "?";
}

misbehaving_client::misbehaving_client(asio::io_context& io, tcp::endpoint daemon, owner& o, misbehaving_kind kind,
                                       settings s)
    : socket_(io), daemon_(daemon), drip_timer_(io), hold_timer_(io), owner_(o), kind_(kind), s_(std::move(s)) {}

double misbehaving_client::age_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - opened_).count();
}

void misbehaving_client::start() {
  opened_ = std::chrono::steady_clock::now();
  error_code ec;
  socket_.open(daemon_.protocol(), ec);
  // A small receive window makes the daemon's writes to a never-reader stall quickly.
  if (!ec && kind_ == misbehaving_kind::never_read)
    socket_.set_option(asio::socket_base::receive_buffer_size(4096), ec);
  hold_timer_.expires_after(s_.hold);
  hold_timer_.async_wait([self = shared_from_this()](error_code e) {
    if (e || self->judged_) return;
    if (!self->connected_) {
      self->judged_ = true;
      self->owner_.on_connect_failed();
      return self->gone();
    }
    // A never-reader whose requests went out is judged by watch_daemon_side instead.
    if (self->kind_ != misbehaving_kind::never_read || self->last_progress_ == time_point{}) self->held();
  });
  socket_.async_connect(daemon_, [self = shared_from_this()](error_code e) {
    if (self->judged_) return;
    if (e) {
      self->judged_ = true;
      self->owner_.on_connect_failed();
      return self->gone();
    }
    self->connected_ = true;
    error_code ignored;
    self->local_port_ = self->socket_.local_endpoint(ignored).port();
    self->on_connected();
  });
}

void misbehaving_client::on_connected() {
  const std::string host = "Host: " + s_.host_header + "\r\n";
  switch (kind_) {
    case misbehaving_kind::header_trickle:
      request_ = "POST /v1/jobs/echo HTTP/1.1\r\n" + host + "X-Soak-Trickle: ";
      break;
    case misbehaving_kind::body_trickle:
      request_ = "POST /v1/jobs/echo HTTP/1.1\r\n" + host +
                 "Request-Timeout: 30S\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n";
      break;
    case misbehaving_kind::never_read:
      request_ = "POST /v1/jobs/echo HTTP/1.1\r\n" + host +
                 "Request-Timeout: 30S\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
                 std::to_string(never_reader_body) + "\r\n\r\n";
      last_progress_ = std::chrono::steady_clock::now();
      watch_daemon_side();
      break;
    case misbehaving_kind::abandon:
      request_ = "POST /v1/jobs/spin HTTP/1.1\r\n" + host + "Request-Timeout: " + format_grpc_timeout(s_.budget) +
                 "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(s_.spin_body.size()) +
                 "\r\n\r\n" + s_.spin_body;
      break;
  }
  std::vector<asio::const_buffer> out{asio::buffer(request_)};
  if (kind_ == misbehaving_kind::never_read) {
    out.clear();
    for (int i = 0; i < never_reader_requests; ++i) {
      out.emplace_back(asio::buffer(request_));
      out.push_back(asio::buffer(echo_body()));
    }
  }
  asio::async_write(socket_, out, [self = shared_from_this()](error_code e, std::size_t) {
    if (self->judged_) return;
    if (e) return self->closed_by_server(self->age_s());
    switch (self->kind_) {
      case misbehaving_kind::header_trickle:
      case misbehaving_kind::body_trickle:
        self->watch_for_close();
        self->drip();
        return;
      case misbehaving_kind::never_read: return;  // watch_daemon_side judges it
      case misbehaving_kind::abandon:
        self->drip_timer_.expires_after(abandon_after);
        self->drip_timer_.async_wait([self](error_code e2) {
          if (e2 || self->judged_) return;
          self->judged_ = true;
          self->owner_.on_abandoned();
          self->gone();
        });
        return;
    }
  });
}

void misbehaving_client::drip() {
  drip_timer_.expires_after(drip_every);
  drip_timer_.async_wait([self = shared_from_this()](error_code e) {
    if (e || self->judged_) return;
    static constexpr char byte = 'a';
    asio::async_write(self->socket_, asio::buffer(&byte, 1), [self](error_code e2, std::size_t) {
      if (self->judged_) return;
      if (e2) return self->closed_by_server(self->age_s());
      self->drip();
    });
  });
}

// Reading is allowed to the tricklers: the close shows up as end of stream or a reset.
void misbehaving_client::watch_for_close() {
  socket_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](error_code e, std::size_t) {
    if (self->judged_) return;
    if (e) return self->closed_by_server(self->age_s());
    self->watch_for_close();  // the daemon said something (an error page): keep waiting for the close
  });
}

// Once a second, the daemon's end of our connection: gone or closing means it cut
// us off; ESTABLISHED with a send queue that has not moved for `hold` means it
// sits on a stalled write longer than any --write-timeout should allow.
void misbehaving_client::watch_daemon_side() {
  drip_timer_.expires_after(daemon_side_every);
  drip_timer_.async_wait([self = shared_from_this()](error_code e) {
    if (e || self->judged_) return;
    const auto daemon_end = find_tcp_socket(self->daemon_.port(), self->local_port_);
    if (!daemon_end || daemon_end->state != tcp_established) return self->closed_by_server(self->age_s());
    const auto now = std::chrono::steady_clock::now();
    if (daemon_end->send_queue != self->last_send_queue_) {
      self->last_send_queue_ = daemon_end->send_queue;
      self->last_progress_ = now;
    }
    if (now - self->last_progress_ >= self->s_.hold) return self->held();
    self->watch_daemon_side();
  });
}

void misbehaving_client::closed_by_server(std::optional<double> after_s) {
  judged_ = true;
  owner_.on_closed_by_server(after_s);
  gone();
}

void misbehaving_client::held() {
  judged_ = true;
  owner_.on_held(kind_);
  gone();
}

bool misbehaving_client::stop() {
  const bool unjudged = !judged_;
  judged_ = true;
  gone();
  return unjudged;
}

void misbehaving_client::gone() {
  if (gone_) return;
  gone_ = true;
  drip_timer_.cancel();
  hold_timer_.cancel();
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  owner_.on_gone(this);
}

}  // namespace hourglass::bench
