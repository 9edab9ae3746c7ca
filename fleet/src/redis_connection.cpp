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
#include <stdexcept>

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
  bool asking = false;            // sent right behind an ASKING, whose reply is dropped
  std::shared_ptr<op> then_wait;  // a WAIT sent right behind it, which answers the caller
  bool internal = false;          // AUTH/SELECT: its failure fails the connection
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
        watchdog(strand),
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
    error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    read();
    // AUTH and SELECT are answered before anything else is sent: a command
    // must never run unauthenticated or on the wrong database.
    handshake_pending = 0;
    if (!endpoint.password.empty()) {
      ++handshake_pending;
      send(internal_op({"AUTH", endpoint.password}, "AUTH"));
    }
    if (endpoint.db != 0) {
      ++handshake_pending;
      send(internal_op({"SELECT", std::to_string(endpoint.db)}, "SELECT"));
    }
    if (handshake_pending == 0) opened();
  }

  // The connection is ready: send what waited for it.
  void opened() {
    connect_timer.cancel();  // it also bounded the handshake
    st = state::open;
    backoff = duration::zero();
    retry_at = time_point{};
    is_connected.store(true);
    connects.fetch_add(1);
    if (!reported_up) report("redis: connected to " + where());
    reported_up = true;
    reported_down = false;
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
      const auto self = weak.lock();
      if (!self || self->gen != g || r.result != redis_result::code::ok) return;  // the connection failed anyway
      if (r.reply.is_error()) return self->fail(what + " refused: " + r.reply.str, false);
      if (--self->handshake_pending == 0) self->opened();
    };
    return o;
  }

  void send(const op_ptr& o) {
    if (o->completed.load()) return;
    if (o->asking) {  // in the same write, so nothing comes between the two
      auto a = std::make_shared<op>();
      a->done = [](const redis_result&) {};  // an ASKING refused shows in the command's own reply
      a->sent_on = gen;
      inflight.push_back(a);
      outbuf += detail::format_command({"ASKING"});
    }
    o->sent_on = gen;
    inflight.push_back(o);
    outbuf += o->wire;
    o->wire.clear();
    if (o->then_wait) {
      o->then_wait->sent_on = gen;
      inflight.push_back(o->then_wait);
      outbuf += o->then_wait->wire;
      o->then_wait->wire.clear();
    }
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
          ++self->replies;
          redis_result r;
          r.reply = std::move(*reply);
          o->complete(std::move(r));
          if (g != self->gen) return;  // an AUTH refusal failed the connection
        }
      } catch (const std::exception& e) {  // protocol error, or out of memory copying a reply
        return self->fail(e.what(), true);
      }
      self->read();
    });
  }

  // The connection is unusable: every call on it or waiting for it ends unavailable.
  void fail(const std::string& why, bool was_open) {
    if (reported_up || !reported_down) {
      report("redis: " + std::string(reported_up ? "lost the connection to " : "cannot connect to ") + where() + ": " +
             why);
      reported_up = false;
      reported_down = true;
    }
    last_error = why;
    st = state::closed;
    is_connected.store(false);
    ++gen;  // handlers of this socket do nothing from now on
    error_code ignored;
    socket.close(ignored);
    connect_timer.cancel();
    watchdog.cancel();
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
    if (o->blocking || timed_out)
      return fail(timed_out ? "no answer within the I/O timeout" : "blocking call stopped", true);
    watch_for_answers();
  }

  // A caller gave up before its answer (its deadline was shorter than
  // io_timeout): if no reply at all comes within io_timeout while calls wait,
  // the connection is dead or half-open, and is replaced.
  void watch_for_answers() {
    if (watching) return;
    watching = true;
    watchdog.expires_after(opts.io_timeout);
    watchdog.async_wait([self = shared_from_this(), g = gen, seen = replies](error_code ec) {
      self->watching = false;
      if (ec || g != self->gen || self->st != state::open || self->inflight.empty()) return;
      if (self->replies == seen) return self->fail("no answer within the I/O timeout", true);
      self->watch_for_answers();  // answers still come: keep watching while calls wait
    });
  }

  // `o` ends when `ctx` stops, or after `limit` (nullopt: the caller's
  // deadline alone, or io_timeout when it has none): stopped_error or
  // redis_unavailable, completed on the strand.
  void arm(const op_ptr& o, const context& ctx, std::optional<duration> limit) {
    o->caller = ctx;
    if (limit || ctx.deadline() == never) {
      o->bounded.emplace(ctx.child_until(saturating_add(ctx.get_clock().now(), limit.value_or(opts.io_timeout))));
    }
    const context watched = o->bounded ? o->bounded->get() : ctx;
    std::weak_ptr<op> weak_op = o;
    std::weak_ptr<impl> weak_impl = weak_from_this();
    o->on_stop = std::make_unique<cancellation_callback<std::function<void()>>>(
        watched.token(), std::function<void()>([weak_op, weak_impl] {
          op_ptr o = weak_op.lock();
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
              // `o` moves into the post: this thread holds no reference to it after.
              net::post(self->strand, [self, o = std::move(o), by_caller, r = std::move(r)]() mutable {
                if (o->complete(std::move(r))) self->on_abandoned(o, !by_caller);
              });
              return;
            } catch (...) {
              // Out of memory: complete here; an answer, if it comes, is read and dropped.
            }
          }
          o->complete(std::move(r));
        }));
  }

  net::strand<net::io_context::executor_type> strand;
  tcp::socket socket;
  tcp::resolver resolver;
  net::steady_timer connect_timer;  // transport limits, on real time like the daemon's socket timeouts
  net::steady_timer watchdog;
  bool watching = false;
  std::uint64_t replies = 0;
  const redis_endpoint endpoint;
  redis_options opts;  // on_state_change is cleared by the destructor
  hourglass::clock& clk;

  state st = state::closed;    // connecting until the handshake (AUTH, SELECT) is answered
  bool reported_up = false;    // on_state_change last said "connected"
  bool reported_down = false;  // ... or "lost" / "cannot connect"

  std::string where() const { return endpoint.host + ":" + std::to_string(endpoint.port); }
  // Under a lock the destructor also takes to drop the callback: the owner's
  // callback never runs after its redis_connection is gone.
  void report(const std::string& line) {
    std::lock_guard lock(report_mu);
    if (opts.on_state_change) opts.on_state_change(line);
  }
  std::mutex report_mu;
  int handshake_pending = 0;
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
  {
    std::lock_guard lock(impl_->report_mu);
    impl_->opts.on_state_change = nullptr;
  }
  net::post(impl_->strand, [self = impl_] {
    self->shut = true;
    self->fail("connection closed", true);
  });
}

void redis_connection::async_call(const context& ctx, std::vector<std::string> args,
                                  std::function<void(redis_result)> done, bool blocking, std::string_view /*route*/) {
  submit_call(ctx, std::move(args), std::move(done), {.blocking = blocking});
}

void redis_connection::async_call_replicated(const context& ctx, std::vector<std::string> args,
                                             std::function<void(redis_result)> done, int replicas, duration timeout) {
  submit_call(ctx, std::move(args), std::move(done), {.replicas = std::max(replicas, 0), .timeout = timeout});
}

void redis_connection::async_call_asking(const context& ctx, std::vector<std::string> args,
                                         std::function<void(redis_result)> done, int replicas, duration timeout) {
  submit_call(ctx, std::move(args), std::move(done), {.asking = true, .replicas = replicas, .timeout = timeout});
}

namespace {

// The command's answer, held until its WAIT's comes: the caller gets both at
// once. Both ops complete on the connection's strand, in reply order.
struct replicated_answer {
  std::optional<redis_result> command;
  bool answered = false;
  std::function<void(redis_result)> done;

  void answer(redis_result r) {
    if (answered) return;
    answered = true;
    done(std::move(r));
  }
};

}  // namespace

void redis_connection::submit_call(const context& ctx, std::vector<std::string> args,
                                   std::function<void(redis_result)> done, call_shape shape) {
  if (args.empty()) throw std::invalid_argument("redis: a command needs at least its name");
  auto o = std::make_shared<op>();
  o->wire = detail::format_command(args);
  o->blocking = shape.blocking;
  o->asking = shape.asking;
  if (shape.replicas >= 0) {
    // WAIT's timeout 0 would wait forever: at least a millisecond.
    const auto ms = std::max<std::int64_t>(std::chrono::ceil<std::chrono::milliseconds>(shape.timeout).count(), 1);
    auto w = std::make_shared<op>();
    w->wire = detail::format_command({"WAIT", std::to_string(shape.replicas), std::to_string(ms)});
    auto held = std::make_shared<replicated_answer>();
    held->done = std::move(done);
    // The command failed, was refused (an error reply, a redirect) or stopped: answered at once.
    done = [held](redis_result r) {
      if (r.result == redis_result::code::ok && !r.reply.is_error()) {
        held->command = std::move(r);
      } else {
        held->answer(std::move(r));
      }
    };
    w->done = [held](redis_result r) {
      if (held->answered || !held->command) return;
      if (r.result != redis_result::code::ok) return held->answer(std::move(r));  // its connection broke
      redis_result both = std::move(*held->command);
      both.replicas = r.reply.is_integer() ? r.reply.integer : 0;  // an error: no replica vouched for it
      held->answer(std::move(both));
    };
    o->then_wait = std::move(w);
  }
  o->done = std::move(done);
  // Non-blocking commands answer at once: io_timeout bounds them whatever the
  // caller's deadline. A blocking one is bounded by its caller's deadline.
  impl_->arm(o, ctx, shape.blocking ? std::nullopt : std::optional<duration>(impl_->opts.io_timeout));
  if (o->then_wait)
    impl_->arm(o->then_wait, ctx, impl_->opts.io_timeout + std::min(shape.timeout, impl_->opts.io_timeout * 100));
  net::post(impl_->strand, [self = impl_, o] { self->submit(o); });
}

redis_reply redis_client::call(const context& ctx, std::vector<std::string> args, bool blocking,
                               std::string_view route) {
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
      blocking, route);
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
