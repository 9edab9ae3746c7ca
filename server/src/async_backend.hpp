// Where async jobs (Prefer: respond-async) live: this process's memory
// (async_store + the local executor), or, with --broker, the fleet's durable
// queue on Redis. The session hands a request over and sends what comes
// back; a backend that talks to a broker answers later, from its own
// threads, so no I/O thread ever waits on Redis. Internal to the server.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "hourglass/exposition.hpp"
#include "responses.hpp"

namespace hourglass::server::detail {

struct job_input;
struct core;

class async_backend {
 public:
  using reply = std::function<void(response)>;  // called exactly once, from any thread
  virtual ~async_backend() = default;

  // Starts taking jobs (fleet: claims the consumer name, starts consuming).
  virtual void start() {}
  // POST with Prefer: respond-async: 202 once the job is held, or the refusal.
  virtual void submit(std::shared_ptr<const job_input> in, time_point headers_at, duration freshness, reply done) = 0;
  // GET (cancel false) or DELETE (cancel true) of /v1/jobs/{id}.
  virtual void lookup(std::string id, bool cancel, reply done) = 0;
  // SIGTERM: stop taking jobs; running ones may finish until `deadline`.
  virtual void drain(time_point /*deadline*/) {}
  // Its own families on /metrics (the memory store's size, the fleet's series).
  virtual void write_metrics(exposition_writer& /*w*/) const {}
};

// Today's process-local behaviour: async_endpoints on core's store.
std::unique_ptr<async_backend> make_memory_backend(core& c);

}  // namespace hourglass::server::detail
