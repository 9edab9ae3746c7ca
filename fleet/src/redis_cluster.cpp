#include "hourglass/fleet/redis_cluster.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>

#include "cluster_slots.hpp"
#include "hourglass/cancellation.hpp"

namespace hourglass::fleet {

namespace net = boost::asio;

namespace {

redis_result cluster_unavailable(std::string message) {
  redis_result r;
  r.result = redis_result::code::unavailable;
  r.message = "redis cluster: " + std::move(message);
  return r;
}

// One call from async_call to its one result, across redirects and retries.
struct attempt {
  context ctx;
  std::vector<std::string> args;
  std::function<void(redis_result)> done;
  bool blocking = false;
  int replicas = -1;  // >= 0: a WAIT behind it, on the node that runs it
  duration wait_timeout{};
  std::optional<std::uint16_t> slot;  // nullopt: any master will do
  int redirects_left = 0;
  duration pause{};
  duration paused{};  // TRYAGAIN pauses so far: at most the I/O timeout in all
  std::atomic<bool> finished{false};
  // While it waits for a slot map or a TRYAGAIN pause: its context's stop ends it.
  std::unique_ptr<cancellation_callback<std::function<void()>>> on_stop;

  void finish(redis_result r) {
    if (finished.exchange(true)) return;
    done(std::move(r));
  }
  void finish_stopped() {
    redis_result r;
    r.result = redis_result::code::stopped;
    r.stop_status = ctx.stop_status();
    finish(std::move(r));
  }
};
using attempt_ptr = std::shared_ptr<attempt>;

}  // namespace

struct redis_cluster::impl : std::enable_shared_from_this<impl> {
  impl(net::io_context& i, std::vector<redis_endpoint> s, redis_cluster_options o)
      : io(i), seeds(std::move(s)), opts(std::move(o)) {
    if (seeds.empty()) throw std::invalid_argument("redis cluster: no seed node");
    password = seeds.front().password;
  }

  // ---- routing ----

  void run(const attempt_ptr& a) {
    if (a->finished.load()) return;
    if (a->ctx.done()) return a->finish_stopped();
    std::shared_ptr<redis_connection> conn;
    std::string where;
    {
      std::unique_lock lock(mu);
      if (shut) {
        lock.unlock();
        return a->finish(cluster_unavailable("closed"));
      }
      if (!map) {
        waiting_for_map.push_back(a);
        start_refresh(lock);
        lock.unlock();
        return watch(a);  // outside the lock: a stop that came already finishes it here
      }
      const detail::cluster_node* node = nullptr;
      if (a->slot) {
        node = map->owner(*a->slot);
      } else if (!map->masters().empty()) {
        node = &map->masters().front();
      }
      if (node == nullptr) {
        start_refresh(lock);
        return a->finish(
            cluster_unavailable(a->slot ? "no master serves slot " + std::to_string(*a->slot) : "no master known"));
      }
      conn = connection(*node);
      where = node->host;
    }
    auto self = shared_from_this();
    auto answered = [self, a, where](redis_result r) { self->on_result(a, where, std::move(r)); };
    if (a->replicas >= 0) return conn->async_call_replicated(a->ctx, a->args, answered, a->replicas, a->wait_timeout);
    conn->async_call(a->ctx, a->args, answered, a->blocking);
  }

  void on_result(const attempt_ptr& a, const std::string& answered_by, redis_result r) {
    if (r.result == redis_result::code::unavailable) {
      refresh();  // a node lost may be a master failing over: the next call finds its successor
      return a->finish(std::move(r));
    }
    if (r.result != redis_result::code::ok || !r.reply.is_error()) return a->finish(std::move(r));
    const std::string& error = r.reply.str;
    if (auto to = detail::parse_redirect(error)) {
      if (a->redirects_left-- <= 0) return a->finish(cluster_unavailable("too many redirects, last: " + error));
      redirect_count.fetch_add(1);
      const detail::cluster_node node{to->host.empty() ? answered_by : to->host, to->port};
      if (to->how == detail::redirect::kind::ask) {
        std::shared_ptr<redis_connection> conn;
        {
          const std::lock_guard lock(mu);
          conn = connection(node);
        }
        auto self = shared_from_this();
        const std::string host = node.host;
        conn->async_call_asking(
            a->ctx, a->args, [self, a, host](redis_result r2) { self->on_result(a, host, std::move(r2)); }, a->replicas,
            a->wait_timeout);
        return;
      }
      {
        std::unique_lock lock(mu);
        if (map) map->move(to->slot, node);
        start_refresh(lock);  // more slots may have moved with it
      }
      return run(a);
    }
    if (detail::is_try_again(error)) {
      // A migration under way: sent again until it completes, inside the
      // caller's deadline (watched) and the I/O timeout, never answered as done.
      if (a->paused >= opts.node.io_timeout) {
        return a->finish(cluster_unavailable("a slot migration did not complete within the I/O timeout: " + error));
      }
      redirect_count.fetch_add(1);
      return pause_then_run(a);
    }
    if (detail::is_cluster_down(error)) {
      refresh();
      return a->finish(cluster_unavailable(error));
    }
    a->finish(std::move(r));
  }

  void pause_then_run(const attempt_ptr& a) {
    const duration pause = a->pause;
    a->paused += pause;
    a->pause = std::min(a->pause * 2, opts.try_again_pause * 8);
    watch(a);
    auto timer = std::make_shared<net::steady_timer>(io, pause);
    timer->async_wait([self = shared_from_this(), a, timer](boost::system::error_code) { self->run(a); });
  }

  // While `a` waits here rather than at a connection, its context's stop ends it.
  static void watch(const attempt_ptr& a) {
    if (a->on_stop) return;
    std::weak_ptr<attempt> weak = a;
    a->on_stop = std::make_unique<cancellation_callback<std::function<void()>>>(a->ctx.token(),
                                                                                std::function<void()>([weak] {
                                                                                  if (auto a2 = weak.lock())
                                                                                    a2->finish_stopped();
                                                                                }));
  }

  // ---- the slot map ----

  void refresh() {
    std::unique_lock lock(mu);
    start_refresh(lock);
  }

  // One refresh at a time; one asked for during it runs after it; with a
  // map known, none sooner than min_refresh_gap after the last began.
  void start_refresh(std::unique_lock<std::mutex>& lock) {
    if (shut) return;
    if (refreshing) {
      refresh_again = true;
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (map && now - last_refresh < opts.min_refresh_gap) {
      if (refresh_timed) return;
      refresh_timed = true;
      auto timer = std::make_shared<net::steady_timer>(io, last_refresh + opts.min_refresh_gap);
      timer->async_wait([self = shared_from_this(), timer](boost::system::error_code) {
        {
          const std::lock_guard lock(self->mu);
          self->refresh_timed = false;
        }
        self->refresh();
      });
      return;
    }
    last_refresh = now;
    refreshing = true;
    std::vector<detail::cluster_node> candidates;
    if (map) candidates = map->masters();
    for (const redis_endpoint& s : seeds) {
      const detail::cluster_node n{s.host, s.port};
      if (std::find(candidates.begin(), candidates.end(), n) == candidates.end()) candidates.push_back(n);
    }
    lock.unlock();
    ask_for_slots(std::move(candidates), 0, "no node to ask");
    lock.lock();
  }

  void ask_for_slots(std::vector<detail::cluster_node> candidates, std::size_t i, std::string last_error) {
    if (i == candidates.size()) return refreshed(std::nullopt, "no node answered CLUSTER SLOTS (" + last_error + ")");
    std::shared_ptr<redis_connection> conn;
    {
      const std::lock_guard lock(mu);
      if (!shut) conn = connection(candidates[i]);
    }
    // Shut down while refreshing: answered outside the lock, which refreshed() takes.
    if (!conn) return refreshed_locked_out();
    auto self = shared_from_this();
    conn->async_call(context(), {"CLUSTER", "SLOTS"},
                     [self, candidates = std::move(candidates), i](redis_result r) mutable {
                       std::string error;
                       if (r.result != redis_result::code::ok) {
                         error = r.message;
                       } else {
                         try {
                           auto m = detail::slot_map::from_cluster_slots(r.reply, candidates[i]);
                           if (!m.masters().empty()) return self->refreshed(std::move(m), "");
                           error = candidates[i].address() + " serves no slot";
                         } catch (const std::exception& e) {
                           error = e.what();
                         }
                       }
                       self->ask_for_slots(std::move(candidates), i + 1, std::move(error));
                     });
  }

  void refreshed_locked_out() {
    // Shut down while refreshing: whoever waits ends unavailable.
    refreshed(std::nullopt, "closed");
  }

  void refreshed(std::optional<detail::slot_map> m, const std::string& error) {
    std::vector<attempt_ptr> waiters;
    bool again = false;
    {
      const std::lock_guard lock(mu);
      if (m) {
        map = std::move(m);
        refresh_count.fetch_add(1);
      }
      refreshing = false;
      again = refresh_again && !shut;
      refresh_again = false;
      waiters.swap(waiting_for_map);
    }
    for (const attempt_ptr& a : waiters) {
      if (map_known()) {
        run(a);
      } else {
        a->finish(cluster_unavailable(error));
      }
    }
    if (again) refresh();
  }

  bool map_known() const {
    const std::lock_guard lock(mu);
    return map.has_value();
  }

  // Under mu.
  std::shared_ptr<redis_connection> connection(const detail::cluster_node& node) {
    auto& c = nodes[node.address()];
    if (!c) c = std::make_shared<redis_connection>(io, redis_endpoint{node.host, node.port, 0, password}, opts.node);
    return c;
  }

  net::io_context& io;
  const std::vector<redis_endpoint> seeds;
  const redis_cluster_options opts;
  std::string password;

  mutable std::mutex mu;
  bool shut = false;
  std::optional<detail::slot_map> map;
  std::map<std::string, std::shared_ptr<redis_connection>> nodes;  // by address
  bool refreshing = false;
  bool refresh_again = false;
  bool refresh_timed = false;                          // a refresh waits out min_refresh_gap
  std::chrono::steady_clock::time_point last_refresh;  // when the last began
  std::vector<attempt_ptr> waiting_for_map;

  std::atomic<std::uint64_t> refresh_count{0};
  std::atomic<std::uint64_t> redirect_count{0};
};

redis_cluster::redis_cluster(net::io_context& io, std::vector<redis_endpoint> seeds, redis_cluster_options options)
    : impl_(std::make_shared<impl>(io, std::move(seeds), std::move(options))) {}

redis_cluster::~redis_cluster() {
  std::map<std::string, std::shared_ptr<redis_connection>> nodes;
  std::vector<attempt_ptr> waiters;
  {
    const std::lock_guard lock(impl_->mu);
    impl_->shut = true;
    nodes.swap(impl_->nodes);
    waiters.swap(impl_->waiting_for_map);
  }
  for (const attempt_ptr& a : waiters) a->finish(cluster_unavailable("closed"));
  // Each connection's destructor ends its calls unavailable, on its strand.
}

void redis_cluster::async_call(const context& ctx, std::vector<std::string> args,
                               std::function<void(redis_result)> done, bool blocking, std::string_view route) {
  send(ctx, std::move(args), std::move(done), blocking, route, -1, {});
}

void redis_cluster::async_call_replicated(const context& ctx, std::vector<std::string> args,
                                          std::function<void(redis_result)> done, int replicas, duration timeout) {
  send(ctx, std::move(args), std::move(done), false, {}, std::max(replicas, 0), timeout);
}

void redis_cluster::send(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                         bool blocking, std::string_view route, int replicas, duration wait_timeout) {
  if (args.empty()) throw std::invalid_argument("redis: a command needs at least its name");
  auto a = std::make_shared<attempt>();
  a->replicas = replicas;
  a->wait_timeout = wait_timeout;
  a->ctx = ctx;
  a->done = std::move(done);
  a->blocking = blocking;
  if (const auto key = detail::command_key(args)) {
    a->slot = detail::key_slot(*key);
  } else if (!route.empty()) {
    a->slot = detail::key_slot(route);
  }
  a->args = std::move(args);
  a->redirects_left = impl_->opts.max_redirects;
  a->pause = impl_->opts.try_again_pause;
  impl_->run(a);
}

void redis_cluster::reset() {
  std::vector<std::shared_ptr<redis_connection>> conns;
  {
    const std::lock_guard lock(impl_->mu);
    for (auto& [address, c] : impl_->nodes) conns.push_back(c);
  }
  for (auto& c : conns) c->reset();
}

bool redis_cluster::connected() const noexcept {
  const std::lock_guard lock(impl_->mu);
  if (!impl_->map) return false;
  bool any = false;
  for (const detail::cluster_node& n : impl_->map->masters()) {
    const auto it = impl_->nodes.find(n.address());
    if (it == impl_->nodes.end()) continue;  // not used yet: opened on its first call
    if (!it->second->connected()) return false;
    any = true;
  }
  return any;
}

std::uint64_t redis_cluster::map_refreshes() const noexcept { return impl_->refresh_count.load(); }
std::uint64_t redis_cluster::redirects() const noexcept { return impl_->redirect_count.load(); }

std::unique_ptr<redis_client> connect_broker(net::io_context& io, bool cluster, std::vector<redis_endpoint> nodes,
                                             redis_options options) {
  if (nodes.empty()) throw std::invalid_argument("redis: no broker node");
  if (!cluster) return std::make_unique<redis_connection>(io, std::move(nodes.front()), std::move(options));
  redis_cluster_options o;
  o.node = std::move(options);
  return std::make_unique<redis_cluster>(io, std::move(nodes), std::move(o));
}

}  // namespace hourglass::fleet
