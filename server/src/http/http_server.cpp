#include "hourglass/server/http_server.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <stdexcept>
#include <thread>

#include "core/child_jobs.hpp"
#include "core/core.hpp"
#include "core/log_throttle.hpp"
#include "core/stream_output.hpp"
#include "hourglass/server/builtin_handlers.hpp"
#include "hourglass/support/secret_file.hpp"
#include "hourglass/support/url.hpp"
#include "http/child_enqueue.hpp"
#include "http/session.hpp"
#include "stores/fleet_job_store.hpp"

namespace hourglass::server {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct http_server::impl {
  impl(server_options o, hourglass::clock& clk) : c(std::move(o), clk) {}

  void accept();
  void serve(tcp::socket socket);
  void stop_io();
  void drain(duration grace);

  detail::core c;
  std::optional<tcp::acceptor> acceptor;
  std::optional<net::steady_timer> accept_retry;
  // On the acceptor's strand; real time, like the socket timeouts (a log
  // rate is a transport matter): a flood of refusals logs a line a second.
  detail::log_throttle accept_failures{std::chrono::seconds(1)};
  detail::log_throttle refused_connections{std::chrono::seconds(1)};
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  std::uint16_t port = 0;
  std::string address;
  std::atomic<bool> started{false};

  std::mutex mu;
  std::condition_variable cv;
  bool drain_started = false;
  bool stopped = false;
};

// One accepted connection: served, or closed at once past --max-connections.
void http_server::impl::serve(tcp::socket socket) {
  // Each response (or stream chunk) goes out when written, as nginx's
  // tcp_nodelay does: Nagle would hold a small write behind an unacked one.
  // (A Unix-domain socket, adopted, has no such option: the error is moot.)
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto s = std::make_shared<detail::session>(c, std::move(socket));
  if (c.connections->add(s, c.opts.max_connections)) {
    s->start();
  } else if (const auto n = refused_connections.admit(std::chrono::steady_clock::now())) {
    c.log->warn("connection refused: {} connections open (--max-connections); {} refused since the last line",
                c.opts.max_connections, n);
  }
}

void http_server::impl::accept() {
  acceptor->async_accept(c.connection_executor(), [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (ec) {
      // Out of descriptors or similar: back off briefly instead of spinning.
      if (const auto n = accept_failures.admit(std::chrono::steady_clock::now())) {
        c.log->warn("accept failed: {}; {} failures since the last line, retrying every 50 ms", ec.message(), n);
      }
      accept_retry->expires_after(std::chrono::milliseconds(50));
      accept_retry->async_wait([this](boost::system::error_code e) {
        if (!e && acceptor->is_open()) accept();
      });
      return;
    }
    serve(std::move(socket));
    accept();
  });
}

void http_server::impl::stop_io() {
  work.reset();
  c.io.stop();
  for (auto& t : io_threads) t.join();
  io_threads.clear();
}

void http_server::impl::drain(duration grace) {
  {
    std::unique_lock lock(mu);
    if (drain_started) {
      cv.wait(lock, [&] { return stopped; });
      return;
    }
    drain_started = true;
  }
  c.draining.store(true);
  if (started.load()) {
    c.log->info("draining: readyz 503, new jobs refused; running jobs get {} ms", to_millis(grace));
    // Stops admitting, lets jobs run until the drain deadline, cancels the rest
    // (cause shutdown). Returns when every job has its outcome, which is then
    // on its way to its connection.
    const time_point drain_deadline = saturating_add(c.clk.now(), grace);
    c.schedules->stop();             // no fire after this
    c.store->drain(drain_deadline);  // fleet: stop consuming, hand unfinished jobs back
    c.jobs->shutdown(drain_deadline);

    std::promise<void> closed;
    net::post(acceptor->get_executor(), [&] {
      boost::system::error_code ignored;
      acceptor->close(ignored);
      accept_retry->cancel();
      closed.set_value();
    });
    closed.get_future().wait();
    c.upstreams->close_idle();
    {
      auto live = c.connections->live();
      for (auto& s : live) s->close_when_idle();
    }
    const auto limit = std::min<duration>(c.opts.body_timeout, std::chrono::seconds(5));
    if (!c.connections->wait_empty(limit)) {
      c.log->warn("drain: {} connections still open after {} ms, closing them", c.connections->size(),
                  to_millis(limit));
    }
    stop_io();
    c.log->info("drained");
  } else {
    c.jobs->shutdown();
  }
  std::lock_guard lock(mu);
  stopped = true;
  cv.notify_all();
}

http_server::http_server(server_options options, hourglass::clock& clk) {
  validate(options);
  impl_ = std::make_unique<impl>(std::move(options), clk);
  if (impl_->c.opts.builtin_handlers) {
    handler_options in_place;  // echo copies its body: microseconds, never blocks
    in_place.run_inline = true;
    add_handler("echo", echo_handler(), in_place);
    add_handler("sleep", sleep_handler());
    add_handler("spin", spin_handler());
    add_handler("approval", approval_handler());
    add_handler("fanout", fanout_handler(*this));
    add_stream_handler("stream", stream_content_type, stream_handler());
    add_handler("call", call_handler(*impl_->c.upstreams, impl_->c.jobs.get()));
  }
}

http_server::~http_server() {
  if (impl_) impl_->drain(duration::zero());
}

void http_server::add_handler(const std::string& name, handler_fn fn, handler_options options) {
  if (impl_->started.load()) throw std::logic_error("add_handler after start(): " + name);
  if (!valid_handler_name(name)) throw std::logic_error("invalid handler name '" + name + "'");
  if (!fn) throw std::logic_error("empty handler function for '" + name + "'");
  auto& c = impl_->c;
  if (c.handlers.count(name) != 0) throw std::logic_error("duplicate handler '" + name + "'");
  detail::handler_entry e;
  e.name = name;
  e.fn = std::move(fn);
  e.run_limit = options.run_limit > duration::zero() ? options.run_limit : c.opts.max_budget;
  e.min_budget = options.min_budget.value_or(c.opts.min_budget);
  if (options.idle_limit <= duration::zero()) throw std::logic_error("idle limit of '" + name + "' must be positive");
  e.idle_limit = options.idle_limit;
  e.run_inline = options.run_inline;
  try {
    validate(options.retry);
  } catch (const std::invalid_argument& ex) {
    throw std::logic_error("retry policy of '" + name + "': " + ex.what());
  }
  e.retry = options.retry;
  e.metrics = &c.jobs->handler(name);
  c.handlers.emplace(name, std::move(e));
}

void http_server::add_stream_handler(const std::string& name, std::string content_type, stream_handler_fn fn,
                                     handler_options options) {
  if (!fn) throw std::logic_error("empty handler function for '" + name + "'");
  // Async and fleet jobs run the collecting form; sync jobs stream (session.cpp).
  add_handler(
      name,
      [fn, content_type, max_result = impl_->c.opts.max_result](const context& ctx, const request_view& req) {
        detail::collected_output out(ctx, max_result);
        fn(ctx, req, out);
        return handler_result{std::move(out.body), content_type};
      },
      options);
  auto& e = impl_->c.handlers.at(name);
  e.stream = std::move(fn);
  e.stream_content_type = std::move(content_type);
}

namespace {

// A bearer token: one word of at least min_token_length characters (a
// short one is guessed, not stolen), from a file nobody else should read.
constexpr std::size_t min_token_length = 16;

std::string read_token(const std::string& path, const std::string& option, spdlog::logger& log) {
  std::string t = support::read_secret_file(path, option);
  if (t.find_first_of(" \t\r\n") != std::string::npos) {
    throw std::runtime_error(option + " " + path + ": the token must be one word");
  }
  if (t.size() < min_token_length) {
    throw std::runtime_error(option + " " + path + ": the token must be at least " + std::to_string(min_token_length) +
                             " characters (e.g. openssl rand -hex 16)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    log.warn("{} {}: readable by others than its owner (mode {:o}): chmod 600 it", option, path, st.st_mode & 0777);
  }
  return t;
}

}  // namespace

void http_server::start() {
  auto& m = *impl_;
  if (m.started.load()) throw std::logic_error("http_server::start called twice");
  {
    std::lock_guard lock(m.mu);
    if (m.drain_started) throw std::logic_error("http_server::start after drain");
  }
  auto& c = m.c;
  if (!c.opts.auth_token_file.empty()) c.token = read_token(c.opts.auth_token_file, "--auth-token-file", *c.log);
  if (!c.opts.admin_token_file.empty()) {
    c.admin_token = read_token(c.opts.admin_token_file, "--admin-token-file", *c.log);
    // The admin token pauses, resumes and purges: one that also submits jobs is no separate key.
    if (c.admin_token == c.token)
      throw std::runtime_error("--admin-token-file: the admin token equals the access token");
  }
  c.schedules->check_handlers();  // before anything runs: a schedule of no handler is a configuration error
  for (const auto& [name, policy] : c.opts.handler_retries) {  // --retry: over the registered policy
    const auto it = c.handlers.find(name);
    if (it == c.handlers.end()) throw std::invalid_argument("--retry: no handler '" + name + "'");
    it->second.retry = policy;
  }

  const listen_endpoint ep = parse_listen(c.opts.listen);
  const tcp::endpoint endpoint(net::ip::make_address(ep.address), ep.port);
  m.acceptor.emplace(net::make_strand(c.io));
  m.accept_retry.emplace(m.acceptor->get_executor());
  boost::system::error_code ec;
  m.acceptor->open(endpoint.protocol(), ec);
  if (!ec) m.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(endpoint, ec);
  if (!ec) m.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error("cannot listen on " + c.opts.listen + ": " + ec.message());
  const auto local = m.acceptor->local_endpoint();
  m.port = local.port();
  m.address = support::endpoint_string(local);

  m.started.store(true);
  m.work.emplace(c.io.get_executor());
  for (std::size_t i = 0; i < c.opts.io_threads; ++i) {
    m.io_threads.emplace_back([&c] {
      for (;;) {
        try {
          c.io.run();
          return;
        } catch (const std::exception& e) {
          c.log->error("I/O thread: {}", e.what());
        }
      }
    });
  }
  if (!c.opts.broker.empty()) {
    // Before the first accept, so no async job goes to memory. The broker's
    // connections run on the I/O threads, which are up by now.
    try {
      c.store = detail::make_fleet_job_store(c, m.port);
      c.store->start();
    } catch (...) {
      // Not serving without the broker: async jobs would have nowhere to go.
      m.stop_io();
      m.started.store(false);
      c.store = detail::make_memory_job_store(c);
      m.acceptor.reset();
      throw;
    }
  }
  c.schedules->start();  // on the store that will keep the jobs
  net::post(m.acceptor->get_executor(), [&m] { m.accept(); });
  c.log->info("hourglassd listening on {} (workers={}, io-threads={}, policy={}, queue-capacity={}, auth={})",
              m.address, c.jobs->workers(), c.opts.io_threads, c.fifo() ? "fifo" : "hourglass", c.opts.queue_capacity,
              c.token.empty() ? "off" : "bearer");
}

void http_server::adopt_connection(int fd) {
  auto& m = *impl_;
  if (!m.started.load() || m.c.draining.load()) {
    ::close(fd);
    throw std::logic_error("http_server::adopt_connection outside start() .. drain()");
  }
  // The session only reads, writes and shuts down: any connected stream
  // socket will do (a Unix-domain one has no TCP endpoint to report).
  tcp::socket socket(m.c.connection_executor());
  boost::system::error_code ec;
  socket.assign(tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);
    throw std::runtime_error("adopt_connection: " + ec.message());
  }
  m.serve(std::move(socket));
}

std::uint16_t http_server::port() const noexcept { return impl_->port; }
std::string http_server::local_address() const { return impl_->address; }
void http_server::drain() { impl_->drain(impl_->c.opts.drain_timeout); }

void http_server::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [&] { return impl_->stopped; });
}

bool http_server::ready() const noexcept { return impl_->started.load() && !impl_->c.draining.load(); }
hourglass::executor& http_server::jobs() noexcept { return *impl_->c.jobs; }
upstream_client& http_server::upstreams() noexcept { return *impl_->c.upstreams; }

child_answer http_server::enqueue_child(const context& ctx, const request_view& parent, child_job job) {
  if (!impl_->started.load() || !impl_->c.store) throw std::logic_error("enqueue_child before start()");
  return detail::enqueue_child(impl_->c, ctx, parent, std::move(job));
}
boost::asio::io_context& http_server::io_context() noexcept { return impl_->c.io; }
const server_options& http_server::options() const noexcept { return impl_->c.opts; }

}  // namespace hourglass::server
