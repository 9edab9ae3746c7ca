// The pieces the fleet experiments share (hourglass-bench fleet and
// cluster): the broker's clients and I/O threads, a daemon's worth of
// consumer, pipelined producers. Internal to bench/fleet/.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "hourglass/executor.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/url.hpp"

namespace hourglass::bench::fleet_parts {

using steady = std::chrono::steady_clock;

// The broker (one Redis, or a cluster's seed nodes) and the connections'
// io_context, run by two threads of its own.
struct broker_io {
  explicit broker_io(const std::string& url);
  ~broker_io();
  broker_io(const broker_io&) = delete;
  broker_io& operator=(const broker_io&) = delete;

  // A client of the broker: a connection, or a cluster client.
  std::unique_ptr<fleet::redis_client> connect();
  // A connection to one node (INFO readings are per node).
  std::unique_ptr<fleet::redis_connection> node(const fleet::redis_endpoint& endpoint);

  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work{io.get_executor()};
  std::vector<std::thread> threads;
  support::broker_url url;
  std::vector<fleet::redis_endpoint> seeds;
};

double seconds(steady::duration d);
// "bench-<what>-<pid>": a name no other run uses.
std::string unique(const std::string& what);
void drop_queue(fleet::redis_client& c, const std::string& name);

// Runs send(i, done) for i in [first, n) by `step`, at most `window` in
// flight (done() ends one), and waits for all: a pipelined client.
void windowed(std::uint64_t first, std::uint64_t n, std::uint64_t step, std::size_t window,
              const std::function<void(std::uint64_t, std::function<void()>)>& send);

// One daemon's worth: its executor, clients, queue and consumer.
struct member {
  member(broker_io& b, const std::string& queue_name, const std::string& name, std::size_t slots, std::size_t prefetch,
         fleet::job_runner runner);

  executor jobs;
  std::unique_ptr<fleet::redis_client> commands;
  std::unique_ptr<fleet::redis_client> reader;
  fleet::job_queue queue;
  fleet::consumer consumer;
};
using fleet_members = std::vector<std::unique_ptr<member>>;

fleet_members start_fleet(broker_io& b, const std::string& name, std::size_t consumers, std::size_t slots,
                          std::size_t prefetch, const fleet::job_runner& runner);
std::uint64_t written(const fleet_members& fleet);  // outcomes the fleet wrote
void wait_written(const fleet_members& fleet, std::uint64_t n);
void stop_fleet(fleet_members& fleet);

// Enqueues `jobs` empty jobs to queue `name` from `producers` threads, each
// pipelined (`window` in flight), one job per call or `bulk` per enqueue_bulk.
void produce(broker_io& b, const std::string& name, std::uint64_t jobs, std::size_t producers, std::size_t window,
             std::size_t bulk);

// Runs an empty job.
extern const fleet::job_runner noop;

}  // namespace hourglass::bench::fleet_parts
