// A real Redis Cluster for the fleet's tests: six redis-server processes on
// free loopback ports (three masters, one replica each), joined by
// `redis-cli --cluster create`, killed and their directories removed at the
// end. Nothing beyond tools/install-deps's redis-server and redis-tools.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace hourglass::fleet::testing {

class redis_cluster_servers {
 public:
  // Starts the nodes and creates the cluster; returns once every node says
  // cluster_state:ok and agrees on who serves each slot. Throws std::runtime_error.
  // Node i runs with its wall clock skews[i % skews.size()] off (none when empty).
  explicit redis_cluster_servers(int masters = 3, int replicas_each = 1, std::vector<std::string> skews = {});

  std::vector<redis_server*> nodes() const;
  std::vector<redis_endpoint> seeds() const;  // every node
  std::string url() const;                    // redis+cluster://127.0.0.1:P1,...

  // The node serving `key`'s slot now (as CLUSTER SLOTS on the first live node says).
  redis_server& master_of(const std::string& key) const;
  // A master that does not serve `key`'s slot.
  redis_server& other_master(const std::string& key) const;
  std::string node_id(const redis_server& node) const;

  // A command on one node, on a connection of its own; throws on a lost node.
  redis_reply on(const redis_server& node, std::vector<std::string> args) const;

  // Moves `key`'s slot (and the keys in it) from its master to `to`, as
  // redis-cli --cluster reshard does: IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE.
  // With finish = false it stops after the keys named in `move_keys` have
  // migrated, the slot still MIGRATING (ASK and TRYAGAIN territory).
  void migrate_slot(const std::string& key, const redis_server& to, const std::vector<std::string>& move_keys,
                    bool finish = true) const;
  // Moves every slot `from` serves to `to` with `redis-cli --cluster reshard`,
  // the operator's tool; returns once it has finished. Throws on failure.
  void reshard_all(const redis_server& from, const redis_server& to) const;
  // Ends a migration migrate_slot(finish = false) left open: the slot is `to`'s.
  void finish_migration(const std::string& key, const redis_server& from, const redis_server& to) const;

 private:
  void form(int masters, int replicas_each, const std::vector<std::string>& skews);
  std::vector<std::unique_ptr<redis_server>> nodes_;
};

}  // namespace hourglass::fleet::testing
