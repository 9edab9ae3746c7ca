// A Redis client on Asio, for the fleet's broker (docs/fleet.md).
//
// hiredis encodes commands and parses replies (redisFormatCommandArgv,
// redisReader); Asio moves the bytes. One redis_connection is one TCP
// connection on its own strand: calls are pipelined and answered in order,
// there is no thread per connection and nothing blocks an I/O thread.
//
//   boost::asio::io_context io;  // run by the caller's I/O threads
//   hourglass::fleet::redis_connection redis(io, {"127.0.0.1", 6379});
//   redis_reply r = redis.call(ctx, {"XADD", "hg:{q}:jobs", "*", "h", "echo"});
//
// Every call carries the caller's context: its deadline and cancellation end
// the wait at once (stopped_error with the context's reason). A call whose
// context has no deadline is bounded by options.io_timeout; a broker that does
// not answer within it, cannot be reached, or breaks the protocol is
// redis_unavailable (the daemon answers 503 broker_unavailable), and the
// connection is closed so the next call starts on a fresh one.
//
// Reconnecting: the connection is opened on the first call, and again on the
// first call after it broke. After a failed connect, calls fail at once with
// redis_unavailable until the backoff (doubling from backoff_min to
// backoff_max, measured on options.clock) has passed; a connect that succeeds
// resets it. AUTH and SELECT are sent first on every new connection.
//
// Blocking commands (XREADGROUP ... BLOCK): give them a connection of their
// own and pass blocking = true, so that a stop closes the connection rather
// than leaving the server's answer to arrive later on a connection others use.
//
// Thread safety: every member may be called from any thread. call() blocks
// the calling thread and must not run on one of the io_context's threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/time.hpp"

namespace boost::asio {
class io_context;
}

namespace hourglass::fleet {

// A RESP2 reply, copied out of hiredis's parse.
struct redis_reply {
  enum class type { nil, status, error, integer, string, array };
  type kind = type::nil;
  std::string str;                    // status, error and string replies
  long long integer = 0;              // integer replies
  std::vector<redis_reply> elements;  // array replies

  bool is_nil() const noexcept { return kind == type::nil; }
  bool is_error() const noexcept { return kind == type::error; }
  bool is_string() const noexcept { return kind == type::string || kind == type::status; }
  bool is_integer() const noexcept { return kind == type::integer; }
  bool is_array() const noexcept { return kind == type::array; }
  // "OK" status, or the same for an error ("ERR unknown command ...").
  bool is_status(std::string_view s) const noexcept { return kind == type::status && str == s; }
};

// The broker cannot be used right now: not reachable, not answering in time,
// refusing our AUTH, or speaking garbage.
class redis_unavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The broker answered a script call with an error: about this call, unless
// the error is one of a moment (refusal_is_lasting() says which). Sent
// again unchanged, a lasting one gets the same answer.
class redis_refused : public redis_unavailable {
 public:
  using redis_unavailable::redis_unavailable;
};

// Whether an error reply ("OOM ...", "ERR ...") would come again for the
// same request: not for the broker's passing states (out of memory, busy
// running a script, loading, read-only or without its master or replicas,
// a cluster re-sharding or down), which refuse every write alike for a
// while; yes for anything else (a script's error, a key of the wrong type).
bool refusal_is_lasting(std::string_view error) noexcept;

struct redis_endpoint {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  int db = 0;
  std::string password;  // empty: no AUTH
};

struct redis_options {
  duration connect_timeout = std::chrono::seconds(2);
  duration io_timeout = std::chrono::seconds(5);  // a call without a deadline
  duration backoff_min = std::chrono::milliseconds(50);
  duration backoff_max = std::chrono::seconds(2);
  std::size_t max_reply_bytes = 64 * 1024 * 1024;  // a larger reply is a protocol failure
  hourglass::clock* clock = nullptr;               // the backoff's; nullptr: real_clock()
  // A line on each change between usable and not ("connected to ...",
  // "lost ...", "cannot connect ..."), not on every failed retry. Called on
  // the connection's strand; nullptr: silent.
  std::function<void(const std::string&)> on_state_change;
};

// What an asynchronous call ends with: a reply (possibly an error reply), or
// why there is none.
struct redis_result {
  enum class code { ok, unavailable, stopped };
  code result = code::ok;
  redis_reply reply;        // when ok
  long long replicas = -1;  // async_call_replicated, ok: the WAIT's answer
  std::string message;      // when unavailable
  status stop_status;       // when stopped: the context's reason
};

// What the fleet calls: one Redis (redis_connection) or a Redis Cluster
// (redis_cluster, redis_cluster.hpp). Every call carries the caller's context
// and ends in one redis_result.
//
// `route` says where a command runs on a cluster: a key in the hash slot it
// concerns. Commands that name a key are routed by it (EVALSHA's first key,
// XREADGROUP's stream, ...); `route` is for those that name none (TIME,
// SCRIPT LOAD, SCAN) and must run on the node serving some slot, as the
// broker's clock of a queue is its own node's. One Redis ignores it.
class redis_client {
 public:
  virtual ~redis_client() = default;

  // Sends `args` as one command; `done` runs once, on an I/O thread.
  virtual void async_call(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                          bool blocking = false, std::string_view route = {}) = 0;

  // The same, with `WAIT replicas timeout` sent right behind it on the same
  // connection, in the same write: `done` has both answers, the WAIT's in
  // redis_result::replicas (how many replicas acknowledged every write sent
  // on that connection up to it). On a cluster, the WAIT goes with the
  // command to whichever node runs it, redirects included.
  virtual void async_call_replicated(const context& ctx, std::vector<std::string> args,
                                     std::function<void(redis_result)> done, int replicas, duration timeout) = 0;

  // The same, waiting: throws redis_unavailable, or stopped_error when `ctx`
  // stopped first. An error reply (-ERR ...) is returned, not thrown. Must not
  // run on one of the io_context's threads.
  redis_reply call(const context& ctx, std::vector<std::string> args, bool blocking = false,
                   std::string_view route = {});

  // Closes every connection now; calls in flight end unavailable. The next call reconnects.
  virtual void reset() = 0;
  virtual bool connected() const noexcept = 0;
};

class redis_connection final : public redis_client {
 public:
  redis_connection(boost::asio::io_context& io, redis_endpoint endpoint, redis_options options = {});
  // Closes the connection; calls still waiting end unavailable.
  ~redis_connection() override;
  redis_connection(const redis_connection&) = delete;
  redis_connection& operator=(const redis_connection&) = delete;

  // `done` runs on the connection's strand. `route` is ignored.
  void async_call(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                  bool blocking = false, std::string_view route = {}) override;
  void async_call_replicated(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                             int replicas, duration timeout) override;
  // The same, sent right behind an ASKING on this connection (a cluster's
  // ASK redirect: the next command may use a slot being imported).
  // replicas >= 0: a WAIT follows it, as async_call_replicated.
  void async_call_asking(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                         int replicas = -1, duration timeout = {});

  void reset() override;
  bool connected() const noexcept override;
  std::uint64_t connects() const noexcept;  // successful connects so far

 private:
  struct call_shape {
    bool blocking = false;
    bool asking = false;  // behind an ASKING
    int replicas = -1;    // >= 0: a WAIT behind it
    duration timeout{};   // the WAIT's
  };
  void submit_call(const context& ctx, std::vector<std::string> args, std::function<void(redis_result)> done,
                   call_shape shape);
  struct impl;
  std::shared_ptr<impl> impl_;
};

}  // namespace hourglass::fleet
