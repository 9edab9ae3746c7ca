// A Redis Cluster client for the fleet's broker (docs/fleet.md, "On a Redis
// Cluster"): one redis_connection per master, each command sent to the master
// serving its key's hash slot.
//
//   hourglass::fleet::redis_cluster redis(io, {{"127.0.0.1", 7000}, {"127.0.0.1", 7001}});
//   redis.call(ctx, {"EVALSHA", sha, "2", "hg:{q}:stream", "hg:{q}:stats", ...});
//
// The slot map comes from CLUSTER SLOTS, asked of the masters it knows and
// then the seeds, on the first call and again after a redirect or a lost
// connection. A MOVED reply records the slot's new master and sends the
// command there; an ASK sends it once to the importing node behind an ASKING;
// a TRYAGAIN (a multi-key command during a slot's migration) is sent again
// after a short pause until the migration completes. All of it inside the
// call's own deadline and the I/O timeout, and at most max_redirects
// MOVED/ASK answers. CLUSTERDOWN, a slot no master
// serves, and a node that cannot be reached end the call redis_unavailable
// (the daemon answers 503) — never retried elsewhere, as a write that was
// sent may have landed; the map is refreshed for the next call.
//
// Thread safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "hourglass/fleet/redis.hpp"

namespace hourglass::fleet {

struct redis_cluster_options {
  redis_options node;     // each master's connection (AUTH with endpoint.password; db must be 0)
  int max_redirects = 5;  // MOVED/ASK answers one call may follow
  // After a TRYAGAIN; doubling, up to 8x; in all at most node.io_timeout.
  duration try_again_pause = std::chrono::milliseconds(10);
  // Slot maps are read again at most this often once one is known: while a
  // master is down every failing call asks for one, and the cluster's nodes
  // should not answer CLUSTER SLOTS in a loop meanwhile.
  duration min_refresh_gap = std::chrono::milliseconds(100);
};

class redis_cluster final : public redis_client {
 public:
  // `seeds`: nodes to ask for the slot map (any node of the cluster will do).
  redis_cluster(boost::asio::io_context& io, std::vector<redis_endpoint> seeds, redis_cluster_options options = {});
  ~redis_cluster() override;
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  void async_call(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                  bool blocking = false, std::string_view route = {}) override;
  void async_call_replicated(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                             int replicas, duration timeout) override;
  void reset() override;
  // A slot map is known and every master's connection opened so far is up.
  bool connected() const noexcept override;

  std::uint64_t map_refreshes() const noexcept;  // slot maps read so far
  std::uint64_t redirects() const noexcept;      // MOVED, ASK and TRYAGAIN answers followed

 private:
  void send(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done, bool blocking,
            std::string_view route, int replicas, duration wait_timeout);
  struct impl;
  std::shared_ptr<impl> impl_;
};

// The broker's client: a redis_cluster on `nodes` when `cluster`, else a
// redis_connection to nodes.front().
std::unique_ptr<redis_client> connect_broker(boost::asio::io_context& io, bool cluster,
                                             std::vector<redis_endpoint> nodes, redis_options options = {});

}  // namespace hourglass::fleet
