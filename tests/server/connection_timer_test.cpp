// connection_timer: a connection's socket timeouts on one lazily re-armed
// timer. The decision is a pure function; the timer itself is run on a real
// io_context (asio's steady timer), where only lower bounds are exact.
#include "http/connection_timer.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <memory>

namespace hourglass::server::detail {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST(ConnectionTimer, AFiredTimerWaitsMovesOnOrExpires) {
  const steady::time_point t0{std::chrono::seconds(100)};
  EXPECT_EQ(next_timer_step(steady::time_point::max(), t0), timer_step::wait);
  EXPECT_EQ(next_timer_step(t0 + 1ns, t0), timer_step::rearm);
  EXPECT_EQ(next_timer_step(t0, t0), timer_step::expire);
  EXPECT_EQ(next_timer_step(t0 - 1s, t0), timer_step::expire);
}

struct fixture {
  boost::asio::io_context io;
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  int expiries = 0;
  steady::time_point expired_at{};
  connection_timer timer{io.get_executor(), [this] {
                           ++expiries;
                           expired_at = steady::now();
                         }};
  fixture() { timer.guard(owner); }
};

TEST(ConnectionTimer, AnExpiryPushedForwardFiresOnceAtTheLastOne) {
  fixture f;
  const auto start = steady::now();
  f.timer.expires_after(20ms);
  f.timer.expires_after(60ms);  // recorded only: the timer stays at 20 ms, then moves
  f.io.run_for(5s);
  EXPECT_EQ(f.expiries, 1);
  EXPECT_GE(f.expired_at - start, 60ms);
}

TEST(ConnectionTimer, AnEarlierExpiryReArmsAtOnce) {
  fixture f;
  const auto start = steady::now();
  f.timer.expires_after(10s);
  f.timer.expires_after(20ms);
  f.io.run_for(5s);
  EXPECT_EQ(f.expiries, 1);
  EXPECT_GE(f.expired_at - start, 20ms);
  EXPECT_LT(f.expired_at - start, 5s) << "not held to the 10 s arming";
}

TEST(ConnectionTimer, NoExpiryMeansNothingFires) {
  fixture f;
  f.timer.expires_after(20ms);
  f.timer.expires_never();  // a job is running: no socket timeout
  f.io.run_for(200ms);
  EXPECT_EQ(f.expiries, 0);
}

TEST(ConnectionTimer, NothingFiresAfterCancelOrOnceItsOwnerIsGone) {
  fixture cancelled;
  cancelled.timer.expires_after(10ms);
  cancelled.timer.cancel();
  cancelled.io.run_for(200ms);
  EXPECT_EQ(cancelled.expiries, 0);

  fixture orphaned;
  orphaned.timer.expires_after(10ms);
  orphaned.owner.reset();
  orphaned.io.run_for(200ms);
  EXPECT_EQ(orphaned.expiries, 0);
}

}  // namespace
}  // namespace hourglass::server::detail
