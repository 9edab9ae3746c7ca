// The Redis client against a real redis-server: pipelining, binary safety,
// error replies, deadlines and cancellation, an unreachable, restarted or
// stuck broker, AUTH and SELECT.
#include "hourglass/fleet/redis.hpp"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <thread>

#include "redis_server.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;

// Destroyed before the io thread stops: the connection's close runs.
struct fixture : ::testing::Test {
  redis_server server;
  io_thread io;
};

using RedisConnection = fixture;

TEST_F(RedisConnection, CommandsArePipelinedAndAnsweredInOrder) {
  redis_connection redis(io.io, server.endpoint());
  std::vector<std::future<redis_result>> replies;
  for (int i = 0; i < 200; ++i) {
    auto p = std::make_shared<std::promise<redis_result>>();
    replies.push_back(p->get_future());
    redis.async_call(context(), {"INCR", "n"}, [p](redis_result r) { p->set_value(std::move(r)); });
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(replies[i].wait_for(10s), std::future_status::ready);
    const redis_result r = replies[i].get();
    ASSERT_EQ(r.result, redis_result::code::ok) << r.message;
    EXPECT_EQ(r.reply.integer, i + 1);
  }
  EXPECT_EQ(redis.connects(), 1u) << "one connection carried them all";
}

TEST_F(RedisConnection, ValuesAreBinarySafeAndRepliesTyped) {
  redis_connection redis(io.io, server.endpoint());
  const std::string value("a\0b\r\n\xff", 6);
  EXPECT_TRUE(redis.call(context(), {"SET", "k", value}).is_status("OK"));
  const redis_reply got = redis.call(context(), {"GET", "k"});
  EXPECT_EQ(got.kind, redis_reply::type::string);
  EXPECT_EQ(got.str, value);
  EXPECT_TRUE(redis.call(context(), {"GET", "absent"}).is_nil());
  redis.call(context(), {"RPUSH", "l", "x", "y"});
  const redis_reply list = redis.call(context(), {"LRANGE", "l", "0", "-1"});
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.elements.size(), 2u);
  EXPECT_EQ(list.elements[1].str, "y");
}

TEST_F(RedisConnection, AnErrorReplyIsAReplyNotAFailure) {
  redis_connection redis(io.io, server.endpoint());
  const redis_reply r = redis.call(context(), {"NOSUCHCOMMAND", "x"});
  EXPECT_TRUE(r.is_error());
  EXPECT_NE(r.str.find("unknown command"), std::string::npos) << r.str;
  EXPECT_TRUE(redis.call(context(), {"PING"}).is_status("PONG")) << "the connection is still good";
}

TEST_F(RedisConnection, TheCallersDeadlineEndsABlockingCallAtOnce) {
  redis_connection redis(io.io, server.endpoint());
  const auto t0 = std::chrono::steady_clock::now();  // before the deadline's clock starts
  auto src = context_source::with_timeout(real_clock(), 150ms);
  try {
    redis.call(src.get(), {"XREAD", "BLOCK", "10000", "STREAMS", "s", "$"}, true);
    FAIL() << "returned before the stream had an entry";
  } catch (const stopped_error& e) {
    EXPECT_EQ(e.why().code, outcome::deadline_exceeded);
  }
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, 150ms) << "not before the caller's deadline";
  EXPECT_LT(waited, 3s) << "not the server's 10 s block";
  EXPECT_TRUE(redis.call(context(), {"PING"}).is_status("PONG")) << "a fresh connection replaces the blocked one";
  EXPECT_EQ(redis.connects(), 2u);
}

TEST_F(RedisConnection, CancellationEndsAWaitWithTheCallersReason) {
  redis_connection blocking(io.io, server.endpoint());  // a blocking command gets a connection of its own
  redis_connection inspect(io.io, server.endpoint());
  context_source src(real_clock());
  auto waiting = std::async(std::launch::async, [&] {
    try {
      blocking.call(src.get(), {"BLPOP", "nothing", "0"}, true);
      return status::ok();
    } catch (const stopped_error& e) {
      return e.why();
    }
  });
  const auto blocked = [&] {
    return inspect.call(context(), {"INFO", "clients"}).str.find("blocked_clients:1") != std::string::npos;
  };
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!blocked() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(blocked()) << "BLPOP never reached the server";
  src.cancel(cancel_cause::caller_gone);
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(waiting.get(), status::cancelled(cancel_cause::caller_gone));
}

TEST_F(RedisConnection, ADeadConnectionIsReplacedEvenWhenCallersGiveUpFirst) {
  redis_options o;
  o.io_timeout = 1s;
  redis_connection redis(io.io, server.endpoint(), o);
  ASSERT_TRUE(redis.call(context(), {"PING"}).is_status("PONG"));
  server.pause();  // accepts bytes, answers nothing: a half-open broker
  auto src = context_source::with_timeout(real_clock(), 50ms);
  EXPECT_THROW(redis.call(src.get(), {"PING"}), stopped_error) << "the caller's 50 ms, not the 1 s I/O timeout";
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (redis.connected() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
  EXPECT_FALSE(redis.connected()) << "no answer within the I/O timeout: the connection is closed";
  server.resume();
  EXPECT_TRUE(redis.call(context(), {"PING"}).is_status("PONG"));
  EXPECT_EQ(redis.connects(), 2u);
}

TEST_F(RedisConnection, AnEmptyCommandIsRefused) {
  redis_connection redis(io.io, server.endpoint());
  EXPECT_THROW(redis.call(context(), {}), std::invalid_argument);
}

TEST_F(RedisConnection, AStoppedNonBlockingCallDoesNotDisturbTheOthers) {
  redis_connection redis(io.io, server.endpoint());
  context_source src(real_clock());
  src.cancel();
  EXPECT_THROW(redis.call(src.get(), {"INCR", "x"}), stopped_error);
  EXPECT_TRUE(redis.call(context(), {"PING"}).is_status("PONG"));
  EXPECT_LE(redis.connects(), 1u);
}

TEST_F(RedisConnection, ABrokerThatDoesNotAnswerIsUnavailableAfterTheIoTimeout) {
  redis_options o;
  o.io_timeout = 200ms;
  redis_connection redis(io.io, server.endpoint(), o);
  ASSERT_TRUE(redis.call(context(), {"PING"}).is_status("PONG"));
  server.pause();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(redis.call(context(), {"PING"}), redis_unavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  server.resume();
  EXPECT_TRUE(redis.call(context(), {"PING"}).is_status("PONG")) << "reconnected";
  EXPECT_EQ(redis.connects(), 2u);
}

TEST_F(RedisConnection, ARestartedBrokerIsReconnectedAndKeptItsData) {
  manual_clock backoff_clock;
  redis_options o;
  o.clock = &backoff_clock;
  redis_connection redis(io.io, server.endpoint(), o);
  ASSERT_TRUE(redis.call(context(), {"SET", "durable", "yes"}).is_status("OK"));
  server.kill9();
  EXPECT_THROW(redis.call(context(), {"GET", "durable"}), redis_unavailable);
  server.restart();
  // A connect may have been refused while it was down: let its backoff pass.
  backoff_clock.advance(o.backoff_max);
  EXPECT_EQ(redis.call(context(), {"GET", "durable"}).str, "yes") << "appendfsync always kept it";
  EXPECT_EQ(redis.connects(), 2u);
}

TEST_F(RedisConnection, EachChangeBetweenUsableAndNotIsReportedOnce) {
  manual_clock backoff_clock;
  std::mutex mu;
  std::vector<std::string> lines;
  redis_options o;
  o.clock = &backoff_clock;
  o.on_state_change = [&](const std::string& l) {
    std::lock_guard lock(mu);
    lines.push_back(l);
  };
  redis_connection redis(io.io, server.endpoint(), o);
  ASSERT_TRUE(redis.call(context(), {"PING"}).is_status("PONG"));
  server.kill9();
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW(redis.call(context(), {"PING"}), redis_unavailable);
    backoff_clock.advance(o.backoff_max);  // let it try to connect again: refused, not reported again
  }
  server.restart();
  backoff_clock.advance(o.backoff_max);
  ASSERT_TRUE(redis.call(context(), {"PING"}).is_status("PONG"));
  std::lock_guard lock(mu);
  ASSERT_EQ(lines.size(), 3u) << ::testing::PrintToString(lines);
  EXPECT_EQ(lines[0].rfind("redis: connected to 127.0.0.1:", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1].rfind("redis: lost the connection to 127.0.0.1:", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("redis: connected to", 0), 0u) << lines[2];
}

TEST(RedisConnectionDown, AnUnreachableBrokerFailsFastAndBacksOff) {
  io_thread io;
  manual_clock clk;
  redis_options o;
  o.clock = &clk;
  o.backoff_min = 100ms;
  redis_connection redis(io.io, {"127.0.0.1", free_port(), 0, ""}, o);
  try {
    redis.call(context(), {"PING"});
    FAIL() << "nothing listens there";
  } catch (const redis_unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("connect"), std::string::npos) << e.what();
  }
  try {
    redis.call(context(), {"PING"});
    FAIL();
  } catch (const redis_unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("retrying in 100 ms"), std::string::npos)
        << "no new attempt inside the backoff: " << e.what();
  }
  clk.advance(100ms);
  try {
    redis.call(context(), {"PING"});
    FAIL();
  } catch (const redis_unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("connect"), std::string::npos) << "tried again: " << e.what();
  }
  try {
    redis.call(context(), {"PING"});
    FAIL();
  } catch (const redis_unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("retrying in 200 ms"), std::string::npos)
        << "the backoff doubled: " << e.what();
  }
  EXPECT_EQ(redis.connects(), 0u);
}

TEST(RedisConnectionAuth, AuthAndSelectComeFirst) {
  redis_server server({"--requirepass", "s3cret"});
  io_thread io;
  redis_endpoint ep = server.endpoint();
  ep.password = "s3cret";
  ep.db = 3;
  {
    redis_connection redis(io.io, ep);
    ASSERT_TRUE(redis.call(context(), {"SET", "k", "in3"}).is_status("OK"));
    ep.db = 0;
    redis_connection other(io.io, ep);
    EXPECT_TRUE(other.call(context(), {"GET", "k"}).is_nil()) << "db 3 is not db 0";
    ep.password = "wrong";
    redis_connection refused(io.io, ep);
    try {
      refused.call(context(), {"GET", "k"});
      FAIL() << "a wrong password got an answer";
    } catch (const redis_unavailable& e) {
      EXPECT_NE(std::string(e.what()).find("AUTH refused"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace hourglass::fleet::testing
