// Rates over recent minutes from the fleet's totals as a daemon read them
// (totals_rates.hpp), pure: samples at exact times in, rates out; and their
// place in the queue object.
#include "core/totals_rates.hpp"

#include <gtest/gtest.h>

#include "core/queue_view.hpp"

namespace hourglass::server::detail {
namespace totals_rates {  // its own: unity batches share a namespace

using namespace std::chrono_literals;
const time_point t0 = time_point{} + 1h;

double rate(const window_rates& r, const std::string& name) {
  for (const auto& [n, v] : r.per_second) {
    if (n == name) return v;
  }
  return -1;
}

TEST(TotalsHistory, ARateIsTheChangeAcrossTheWindowsSamplesPerSecond) {
  totals_history h;
  h.add(t0, {{"expired:queue", 10}, {"finished:ok", 100}});
  h.add(t0 + 30s, {{"expired:queue", 10}, {"finished:ok", 400}});
  h.add(t0 + 60s, {{"expired:queue", 70}, {"finished:ok", 700}, {"retries", 6}});
  const auto r = h.over(1min, t0 + 60s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->span, 60s);
  EXPECT_DOUBLE_EQ(rate(*r, "finished:ok"), 10.0);
  EXPECT_DOUBLE_EQ(rate(*r, "expired:queue"), 1.0);
  EXPECT_DOUBLE_EQ(rate(*r, "retries"), 0.1) << "a counter new since the window began counts from 0";
  EXPECT_FALSE(h.over(5min, t0 + 60s)) << "a minute of history is too little to call a 5-minute rate";
}

TEST(TotalsHistory, TheWindowStartsAtItsOldestSampleAndOlderOnesAreForgotten) {
  totals_history h(6min);
  h.add(t0, {{"finished:ok", 0}});
  h.add(t0 + 4min, {{"finished:ok", 240}});
  h.add(t0 + 5min, {{"finished:ok", 300}});
  const auto last_minute = h.over(1min, t0 + 5min);
  ASSERT_TRUE(last_minute);
  EXPECT_EQ(last_minute->span, 1min) << "from the sample at 4 min, not the one at 0";
  const auto five = h.over(5min, t0 + 5min);
  ASSERT_TRUE(five);
  EXPECT_EQ(five->span, 5min);
  h.add(t0 + 7min, {{"finished:ok", 420}});
  const auto later = h.over(5min, t0 + 7min);
  ASSERT_TRUE(later);
  EXPECT_EQ(later->span, 3min) << "the sample at 0 is past what is kept";
  EXPECT_DOUBLE_EQ(rate(*later, "finished:ok"), 1.0);
}

TEST(TotalsHistory, ReadingsCloserThanASecondReplaceTheLatestNotTheWindowsEdge) {
  totals_history h;
  h.add(t0, {{"finished:ok", 0}});
  h.add(t0 + 20s, {{"finished:ok", 20}});
  for (int i = 1; i <= 10; ++i) h.add(t0 + 20s + i * 10ms, {{"finished:ok", 20u + i}});
  const auto r = h.over(1min, t0 + 21s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->span, 20s + 100ms) << "from the first sample to the latest reading";
  EXPECT_FALSE(totals_history().over(1min, t0)) << "no samples, no rate";
}

TEST(TotalsHistory, ItsRatesInTheQueueObjectAreGroupedAsTheTotals) {
  queue_view q;
  q.name = "default";
  q.store = "fleet";
  q.totals = {{"expired:queue", 3}, {"finished:ok", 7}};
  q.recent.push_back({60, 58.5, {{"expired:queue", 0.25}, {"finished:ok", 12.5}, {"retries", 0.5}}});
  const std::string json = queue_json(q);
  EXPECT_NE(json.find(R"("totals": {"finished": {"ok": 7}, "expired": {"queue": 3}})"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("recent": [{"window_s": 60.000, "span_s": 58.500, "per_second": {"finished": {"ok": 12.500}, )"
                      R"("expired": {"queue": 0.250}, "retries": 0.500}}])"),
            std::string::npos)
      << json;
}

}  // namespace totals_rates
}  // namespace hourglass::server::detail
