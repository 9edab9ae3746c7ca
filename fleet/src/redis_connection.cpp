#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "hourglass/cancellation.hpp"
#include "hourglass/fleet/redis.hpp"
#include "resp.hpp"

namespace hourglass::fleet {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// One command from send to answer. `completed` makes its one outcome final:
// the reply, the connection's failure, or the stop of its context, whichever
// comes first; a reply that comes after a stop is read and dropped.
struct op {
  std::string wire;
  bool blocking = false;
  bool internal = false;  // AUTH/SELECT: its failure fails the connection
  std::function<void(redis_result)> done;
  std::atomic<bool> completed{false};
  context caller;                         // whose stop is `stopped`
  std::optional<context_source> bounded;  // the caller's context bounded by io_timeout
  std::unique_ptr<cancellation_callback<std::function<void()>>> on_stop;
  std::uint64_t sent_on = 0;  // the socket generation it was written to (0: not yet)

  bool complete(redis_result r) {
    if (completed.exchange(true)) return false;
    done(std::move(r));
    return true;
  }
};
using op_ptr = std::shared_ptr<op>;

redis_result unavailable(std::string message) {
  redis_result r;
  r.result = redis_result::code::unavailable;
  r.message = std::move(message);
  return r;
}

}  // namespace

struct redis_connection::impl : std::enable_shared_from_this<impl> {
  impl(net::io_context& io, redis_endpoint e, redis_options o)
      : strand(net::make_strand(io)),
        socket(strand),
        resolver(strand),
        connect_timer(strand),
        endpoint(std::move(e)),
        opts(o),
        clk(o.clock != nullptr ? *o.clock : real_clock()) {}

  enum class state { closed, connecting, open };

  // ---- on the strand ----

  void submit(const op_ptr& o) {
    if (o->completed.load()) return;  // stopped before it got here
    if (shut) {
      o->complete(unavailable("redis: connection closed"));
      return;
    }
    switch (st) {
      case state::open: return send(o);
      case state::connecting: waiting.push_back(o); return;
      case state::closed:
        if (clk.now() < retry_at) {
          o->complete(unavailable(fmt_unreachable()));
          return;
        }
        waiting.push_back(o);
        connect();
        return;
    }
  }

  std::string fmt_unreachable() const {
    return "redis: " + endpoint.host + ":" + std::to_string(endpoint.port) + " unreachable (" + last_error +
           "); retrying in " +
           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(retry_at - clk.now()).count()) + " ms";
  }

  void connect() {
    st = state::connecting;
    const std::uint64_t g = ++gen;
    reader.emplace(opts.max_reply_bytes);
    connect_timer.expires_after(opts.connect_timeout);
    connect_timer.async_wait([self = shared_from_this(), g](error_code ec) {
      if (!ec && g == self->gen && self->st == state::connecting) self->fail("connect timed out", false);
    });
    resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                           [self = shared_from_this(), g](error_code ec, const tcp::resolver::results_type& results) {
                             if (g != self->gen) return;
                             if (ec) return self->fail("resolve: " + ec.message(), false);
                             net::async_connect(self->socket, results, [self, g](error_code ec2, const tcp::endpoint&) {
                               if (g != self->gen) return;
                               if (ec2) return self->fail("connect: " + ec2.message(), false);
                               self->on_connected();
                             });
                           });
  }

  void on_connected() {
    connect_timer.cancel();
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    st = state::open;
    backoff = duration::zero();
    retry_at = time_point{};
    is_connected.store(true);
    connects.fetch_add(1);
    read();
    // AUTH and SELECT go first, then whatever waited for the connection.
    if (!endpoint.password.empty()) send(internal_op({"AUTH", endpoint.password}, "AUTH"));
    if (endpoint.db != 0) send(internal_op({"SELECT", std::to_string(endpoint.db)}, "SELECT"));
    auto queued = std::move(waiting);
    waiting.clear();
    for (auto& o : queued) send(o);
  }

  op_ptr internal_op(const std::vector<std::string>& args, std::string what) {
    auto o = std::make_shared<op>();
    o->wire = detail::format_command(args);
    o->internal = true;
    std::weak_ptr<impl> weak = weak_from_this();
    o->done = [weak, what = std::move(what), g = gen](redis_result r) {
      if (r.result != redis_result::code::ok || !r.reply.is_error()) return;
      if (auto self = weak.lock(); self && self->gen == g) self->fail(what + " refused: " + r.reply.str, false);
    };
    return o;
  }

  void send(const op_ptr& o) {
    if (o->completed.load()) return;
    o->sent_on = gen;
    inflight.push_back(o);
    outbuf += o->wire;
    o->wire.clear();
    flush();
  }

  void flush() {
    if (writing || outbuf.empty()) return;
    writing = true;
    writing_buf.swap(outbuf);
    net::async_write(socket, net::buffer(writing_buf),
                     [self = shared_from_this(), g = gen](error_code ec, std::size_t) {
                       if (g != self->gen) return;
                       self->writing = false;
                       self->writing_buf.clear();
                       if (ec) return self->fail("write: " + ec.message(), true);
                       self->flush();
                     });
  }

  void read() {
    socket.async_read_some(net::buffer(inbuf), [self = shared_from_this(), g = gen](error_code ec, std::size_t n) {
      if (g != self->gen) return;
      if (ec) return self->fail(ec == net::error::eof ? "closed by the server" : "read: " + ec.message(), true);
      try {
        self->reader->feed(self->inbuf.data(), n);
        while (auto reply = self->reader->next()) {
          if (self->inflight.empty()) throw redis_unavailable("redis: a reply nobody asked for");
          op_ptr o = std::move(self->inflight.front());
          self->inflight.pop_front();
          redis_result r;
          r.reply = std::move(*reply);
          o->complete(std::move(r));
          if (g != self->gen) return;  // an AUTH refusal failed the connection
        }
      } catch (const redis_unavailable& e) {
        return self->fail(e.what(), true);
      }
      self->read();
    });
  }

  // The connection is unusable: every call on it or waiting for it ends unavailable.
  void fail(const std::string& why, bool was_open) {
    last_error = why;
    st = state::closed;
    is_connected.store(false);
    ++gen;  // handlers of this socket do nothing from now on
    error_code ignored;
    socket.close(ignored);
    connect_timer.cancel();
    resolver.cancel();
    writing = false;
    outbuf.clear();
    writing_buf.clear();
    if (was_open) {
      retry_at = time_point{};  // it worked until now: try again on the next call
    } else {
      backoff = backoff == duration::zero() ? opts.backoff_min : std::min(backoff * 2, opts.backoff_max);
      retry_at = saturating_add(clk.now(), backoff);
    }
    auto failed = std::move(inflight);
    inflight.clear();
    for (auto& o : waiting) failed.push_back(o);
    waiting.clear();
    const std::string message = why.rfind("redis:", 0) == 0 ? why : "redis: " + why;
    for (auto& o : failed) o->complete(unavailable(message));
  }

  // A stopped call (already completed) that was written on the live socket: a blocking command's
  // answer would come on a connection others use, and a command the server
  // did not answer within io_timeout means the server is stuck.
  void on_abandoned(const op_ptr& o, bool timed_out) {
    if (st != state::open || o->sent_on != gen) return;
    if (o->blocking || timed_out) fail(timed_out ? "no answer within the I/O timeout" : "blocking call stopped", true);
  }

  net::strand<net::io_context::executor_type> strand;
  tcp::socket socket;
  tcp::resolver resolver;
  net::steady_timer connect_timer;  // transport limit, on real time like the daemon's socket timeouts
  const redis_endpoint endpoint;
  const redis_options opts;
  hourglass::clock& clk;

  state st = state::closed;
  bool shut = false;
  std::uint64_t gen = 0;        // bumped per socket and per failure
  std::deque<op_ptr> waiting;   // until connected
  std::deque<op_ptr> inflight;  // written, in reply order
  std::string outbuf, writing_buf;
  bool writing = false;
  std::optional<detail::reply_reader> reader;
  std::array<char, 16 * 1024> inbuf{};
  duration backoff = duration::zero();
  time_point retry_at{};
  std::string last_error = "not connected";

  std::atomic<bool> is_connected{false};
  std::atomic<std::uint64_t> connects{0};
};

redis_connection::redis_connection(net::io_context& io, redis_endpoint endpoint, redis_options options)
    : impl_(std::make_shared<impl>(io, std::move(endpoint), options)) {}

redis_connection::~redis_connection() {
  net::post(impl_->strand, [self = impl_] {
    self->shut = true;
    self->fail("connection closed", true);
  });
}

void redis_connection::async_call(const context& ctx, std::vector<std::string> args,
                                  std::function<void(redis_result)> done, bool blocking) {
  auto o = std::make_shared<op>();
  o->wire = detail::format_command(args);
  o->blocking = blocking;
  o->done = std::move(done);
  o->caller = ctx;
  // Non-blocking commands answer at once: io_timeout bounds them whatever the
  // caller's deadline. A blocking one is bounded by its caller's deadline.
  const duration limit = impl_->opts.io_timeout;
  if (!blocking || ctx.deadline() == never) {
    o->bounded.emplace(ctx.child_until(saturating_add(ctx.get_clock().now(), limit)));
  }
  const context watched = o->bounded ? o->bounded->get() : ctx;
  std::weak_ptr<op> weak_op = o;
  std::weak_ptr<impl> weak_impl = impl_;
  o->on_stop = std::make_unique<cancellation_callback<std::function<void()>>>(
      watched.token(), std::function<void()>([weak_op, weak_impl] {
        const op_ptr o = weak_op.lock();
        if (!o) return;
        const bool by_caller = o->caller.done();
        redis_result r;
        if (by_caller) {
          r.result = redis_result::code::stopped;
          r.stop_status = o->caller.stop_status();
        } else {
          r = unavailable("redis: no answer within the I/O timeout");
        }
        // Completed on the strand, and the connection failed there first if
        // it must be: whatever the caller sends next is queued behind that.
        if (auto self = weak_impl.lock()) {
          try {
            net::post(self->strand, [self, o, by_caller, r = std::move(r)]() mutable {
              if (o->complete(std::move(r))) self->on_abandoned(o, !by_caller);
            });
            return;
          } catch (...) {
            // Out of memory: complete here; an answer, if it comes, is read and dropped.
          }
        }
        o->complete(std::move(r));
      }));
  net::post(impl_->strand, [self = impl_, o] { self->submit(o); });
}

redis_reply redis_connection::call(const context& ctx, std::vector<std::string> args, bool blocking) {
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<redis_result> r;
  };
  auto w = std::make_shared<waiter>();
  async_call(
      ctx, std::move(args),
      [w](redis_result r) {
        std::lock_guard lock(w->mu);
        w->r = std::move(r);
        w->cv.notify_all();
      },
      blocking);
  std::unique_lock lock(w->mu);
  w->cv.wait(lock, [&] { return w->r.has_value(); });
  redis_result r = std::move(*w->r);
  switch (r.result) {
    case redis_result::code::ok: return std::move(r.reply);
    case redis_result::code::unavailable: throw redis_unavailable(r.message);
    case redis_result::code::stopped: throw stopped_error(r.stop_status);
  }
  throw redis_unavailable("redis: unreachable");
}

void redis_connection::reset() {
  net::post(impl_->strand, [self = impl_] {
    if (self->st != impl::state::closed) self->fail("reset", true);
  });
}

bool redis_connection::connected() const noexcept { return impl_->is_connected.load(); }
std::uint64_t redis_connection::connects() const noexcept { return impl_->connects.load(); }

}  // namespace hourglass::fleet
