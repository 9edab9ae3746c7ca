#include "redis_cluster_fixture.hpp"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "cluster_slots.hpp"

namespace hourglass::fleet::testing {

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

redis_cluster_servers::redis_cluster_servers(int masters, int replicas_each, std::vector<std::string> skews) {
  // A node's ports are free ones (free_port binds port 0 and lets go): two
  // clusters forming at once (ctest runs tests side by side) can still meet
  // on one port, and a node then dies or joins the other's cluster; seen
  // once in a release run (both tests: "redis: connect: Connection
  // refused" while forming). Formed again with fresh nodes rather than
  // failing a test that has not begun.
  for (int attempt = 1;; ++attempt) {
    try {
      form(masters, replicas_each, skews);
      return;
    } catch (const std::exception& e) {
      nodes_.clear();
      if (attempt == 3) throw;
      std::fprintf(stderr, "the cluster did not form (%s): forming it again\n", e.what());
    }
  }
}

void redis_cluster_servers::form(int masters, int replicas_each, const std::vector<std::string>& skews) {
  const int count = masters * (1 + replicas_each);
  for (int i = 0; i < count; ++i) {
    // Not durable on each write (the cluster tests are about routing and
    // failover, and six fsyncing servers on two cores are slow); a node
    // times out after 1 s so a failover is quick. The cluster bus on a free
    // port of its own: the default, port + 10000, is past 65535 for a
    // fifth of the ephemeral range, or taken.
    nodes_.push_back(std::make_unique<redis_server>(
        std::vector<std::string>{"--cluster-enabled", "yes", "--cluster-port", std::to_string(free_port()),
                                 "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
                                 "--appendfsync", "everysec", "--cluster-require-full-coverage", "no",
                                 "--repl-diskless-sync-delay", "0"},
        skewed_redis_clock(skews.empty() ? std::string() : skews[static_cast<std::size_t>(i) % skews.size()])));
  }
  std::vector<std::string> create{"redis-cli", "--cluster", "create"};
  for (const auto& n : nodes_) create.push_back("127.0.0.1:" + std::to_string(n->port()));
  create.insert(create.end(), {"--cluster-replicas", std::to_string(replicas_each), "--cluster-yes"});
  const std::string log = "/tmp/hourglass-cluster-create-" + std::to_string(nodes_.front()->port()) + ".log";
  const pid_t pid = test_common::spawn_process(create, log, "redis-cli (tools/install-deps installs redis-tools)");
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("redis-cli --cluster create failed; see " + log);
  }
  std::remove(log.c_str());
  // Every node agrees: all slots served, the cluster ok.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const auto& n : nodes_) {
    while (true) {
      const std::string info = on(*n, {"CLUSTER", "INFO"}).str;
      if (contains(info, "cluster_state:ok") && contains(info, "cluster_slots_ok:16384") &&
          contains(info, "cluster_known_nodes:" + std::to_string(count))) {
        break;
      }
      if (std::chrono::steady_clock::now() > give_up) throw std::runtime_error("the cluster did not form:\n" + info);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

std::vector<redis_server*> redis_cluster_servers::nodes() const {
  std::vector<redis_server*> out;
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<redis_endpoint> redis_cluster_servers::seeds() const {
  std::vector<redis_endpoint> out;
  for (const auto& n : nodes_) out.push_back(n->endpoint());
  return out;
}

std::string redis_cluster_servers::url() const {
  std::string u = "redis+cluster://";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (i > 0) u += ",";
    u += "127.0.0.1:" + std::to_string(nodes_[i]->port());
  }
  return u;
}

redis_reply redis_cluster_servers::on(const redis_server& node, std::vector<std::string> args) const {
  io_thread io;
  redis_options o;
  o.io_timeout = std::chrono::seconds(10);
  redis_connection c(io.io, node.endpoint(), o);
  return c.call(context(), std::move(args));
}

redis_server& redis_cluster_servers::master_of(const std::string& key) const {
  const std::uint16_t slot = detail::key_slot(key);
  for (const auto& n : nodes_) {
    redis_reply slots;
    try {
      slots = on(*n, {"CLUSTER", "SLOTS"});
    } catch (const std::exception&) {
      continue;  // killed
    }
    const auto map = detail::slot_map::from_cluster_slots(slots, {"127.0.0.1", n->port()});
    const detail::cluster_node* owner = map.owner(slot);
    if (owner == nullptr) throw std::runtime_error("no master serves slot " + std::to_string(slot));
    for (const auto& m : nodes_) {
      if (m->port() == owner->port) return *m;
    }
  }
  throw std::runtime_error("no node answers CLUSTER SLOTS");
}

redis_server& redis_cluster_servers::other_master(const std::string& key) const {
  const redis_server& owner = master_of(key);
  for (const auto& n : nodes_) {
    if (n.get() == &owner) continue;
    const std::string role = on(*n, {"ROLE"}).elements.at(0).str;
    if (role == "master") return *n;
  }
  throw std::runtime_error("no other master");
}

std::string redis_cluster_servers::node_id(const redis_server& node) const { return on(node, {"CLUSTER", "MYID"}).str; }

void redis_cluster_servers::migrate_slot(const std::string& key, const redis_server& to,
                                         const std::vector<std::string>& move_keys, bool finish) const {
  const std::string slot = std::to_string(detail::key_slot(key));
  const redis_server& from = master_of(key);
  const auto must = [](const redis_reply& r, const std::string& what) {
    if (r.is_error()) throw std::runtime_error(what + ": " + r.str);
  };
  must(on(to, {"CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(from)}), "SETSLOT IMPORTING");
  must(on(from, {"CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(to)}), "SETSLOT MIGRATING");
  for (const std::string& k : move_keys) {
    must(on(from, {"MIGRATE", "127.0.0.1", std::to_string(to.port()), k, "0", "5000"}), "MIGRATE " + k);
  }
  if (finish) finish_migration(key, from, to);
}

void redis_cluster_servers::reshard_all(const redis_server& from, const redis_server& to) const {
  const auto map = detail::slot_map::from_cluster_slots(on(from, {"CLUSTER", "SLOTS"}), {"127.0.0.1", from.port()});
  int count = 0;
  for (std::uint16_t slot = 0; slot < detail::cluster_slots; ++slot) {
    const detail::cluster_node* owner = map.owner(slot);
    if (owner != nullptr && owner->port == from.port()) ++count;
  }
  const std::string log = "/tmp/hourglass-cluster-reshard-" + std::to_string(from.port()) + ".log";
  const pid_t pid = test_common::spawn_process(
      {"redis-cli", "--cluster", "reshard", "127.0.0.1:" + std::to_string(from.port()), "--cluster-from", node_id(from),
       "--cluster-to", node_id(to), "--cluster-slots", std::to_string(count), "--cluster-yes"},
      log, "redis-cli");
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("redis-cli --cluster reshard failed; see " + log);
  }
  std::remove(log.c_str());
}

void redis_cluster_servers::finish_migration(const std::string& key, const redis_server& from,
                                             const redis_server& to) const {
  const std::string slot = std::to_string(detail::key_slot(key));
  const redis_reply left = on(from, {"CLUSTER", "GETKEYSINSLOT", slot, "100000"});
  for (const redis_reply& k : left.elements)
    on(from, {"MIGRATE", "127.0.0.1", std::to_string(to.port()), k.str, "0", "5000"});
  const std::string to_id = node_id(to);
  // The importing node first, then the rest, as redis-cli does.
  on(to, {"CLUSTER", "SETSLOT", slot, "NODE", to_id});
  on(from, {"CLUSTER", "SETSLOT", slot, "NODE", to_id});
  for (const auto& n : nodes_) {
    if (n.get() == &to || n.get() == &from) continue;
    try {
      if (on(*n, {"ROLE"}).elements.at(0).str == "master") on(*n, {"CLUSTER", "SETSLOT", slot, "NODE", to_id});
    } catch (const std::exception&) {
    }
  }
}

}  // namespace hourglass::fleet::testing
