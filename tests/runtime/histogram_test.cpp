#include "hourglass/histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace hourglass {
namespace {

constexpr double quantiles[] = {0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0};

// The nearest-rank quantile the header documents, on exact data.
std::uint64_t exact_quantile(const std::vector<std::uint64_t>& sorted, double q) {
  if (q <= 0.0) return sorted.front();
  if (q >= 1.0) return sorted.back();
  const double wanted = std::ceil(q * static_cast<double>(sorted.size()));
  std::uint64_t rank = wanted < 1.0 ? 1 : static_cast<std::uint64_t>(wanted);
  rank = std::min<std::uint64_t>(rank, sorted.size());
  return sorted[rank - 1];
}

void expect_quantiles_within_bound(const log_histogram& h, std::vector<std::uint64_t> values) {
  std::sort(values.begin(), values.end());
  const auto snap = h.snapshot();
  for (const double q : quantiles) {
    const std::uint64_t exact = exact_quantile(values, q);
    const std::uint64_t got = snap.value_at_quantile(q);
    const double bound = static_cast<double>(exact) * h.relative_error();
    EXPECT_LE(std::abs(static_cast<double>(got) - static_cast<double>(exact)), bound)
        << "q=" << q << " exact=" << exact << " got=" << got << " precision=" << h.precision();
    EXPECT_GE(got, values.front());
    EXPECT_LE(got, values.back());
    EXPECT_EQ(got, h.value_at_quantile(q));
  }
}

// ---- layout --------------------------------------------------------------

class layout_test : public ::testing::TestWithParam<unsigned> {};

TEST_P(layout_test, BucketsTileTheRangeAndHonourTheErrorBound) {
  const log_bucket_layout layout(GetParam());
  const std::size_t n = layout.bucket_count();
  EXPECT_EQ(n, (log_bucket_layout::value_bits - GetParam() + 1) << GetParam());
  EXPECT_EQ(layout.lower_bound(0), 0u);
  EXPECT_EQ(layout.upper_bound(n - 1), log_bucket_layout::highest_trackable_ns);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t lo = layout.lower_bound(i);
    const std::uint64_t hi = layout.upper_bound(i);
    ASSERT_LE(lo, hi);
    ASSERT_EQ(layout.index_of(lo), i);
    ASSERT_EQ(layout.index_of(hi), i);
    if (i + 1 < n) {
      ASSERT_EQ(layout.lower_bound(i + 1), hi + 1);
    }
    const std::uint64_t r = layout.representative(i);
    ASSERT_LE(lo, r);
    ASSERT_LE(r, hi);
    // Worst cases are the bucket's ends.
    ASSERT_LE(static_cast<double>(r - lo), static_cast<double>(lo) * layout.relative_error()) << i;
    ASSERT_LE(static_cast<double>(hi - r), static_cast<double>(hi) * layout.relative_error()) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(precisions, layout_test, ::testing::Values(1u, 2u, 6u, 9u, 12u));

TEST(log_bucket_layout, DocumentedErrorBounds) {
  EXPECT_LE(log_bucket_layout(log_histogram::default_precision).relative_error(), 0.01);
  EXPECT_LE(log_bucket_layout(log_histogram::three_digits_precision).relative_error(), 0.001);
  EXPECT_EQ(log_bucket_layout(log_histogram::default_precision).bucket_count(), 2496u);
}

TEST(log_histogram, RejectsUnsupportedPrecision) {
  EXPECT_THROW(log_histogram(0), std::invalid_argument);
  EXPECT_THROW(log_histogram(13), std::invalid_argument);
  EXPECT_NO_THROW(log_histogram(1));
  EXPECT_NO_THROW(log_histogram(12));
}

// ---- basic statistics ----------------------------------------------------

TEST(log_histogram, EmptyHistogramReportsZeros) {
  const log_histogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.sum_ns(), 0u);
  EXPECT_EQ(h.min_ns(), 0u);
  EXPECT_EQ(h.max_ns(), 0u);
  EXPECT_EQ(h.value_at_quantile(0.5), 0u);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.value_at_quantile(0.99), 0u);
  EXPECT_EQ(s.count_at_or_below(~std::uint64_t{0}), 0u);
  EXPECT_EQ(s.mean_ns(), 0.0);
}

TEST(log_histogram, CountSumMinMaxAreExact) {
  log_histogram h;
  h.record_ns(1'234'567);
  h.record(std::chrono::microseconds(3));
  h.record(std::chrono::seconds(2));
  h.record_ns(999);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.sum_ns(), 1'234'567u + 3'000u + 2'000'000'000u + 999u);
  EXPECT_EQ(h.min_ns(), 999u);
  EXPECT_EQ(h.max_ns(), 2'000'000'000u);
  EXPECT_EQ(h.clamped_count(), 0u);
  const auto s = h.snapshot();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.min_ns, 999u);
  EXPECT_EQ(s.max_ns, 2'000'000'000u);
  EXPECT_DOUBLE_EQ(s.mean_ns(), static_cast<double>(s.sum_ns) / 4.0);
}

// One writer's plain updates keep exactly the state locked ones would.
TEST(log_histogram, SingleWriterRecordingEqualsRecording) {
  log_histogram locked, plain;
  const std::uint64_t values[] = {999, 0, 1'234'567, 5, log_histogram::highest_trackable_ns + 7, 2'000'000'000, 64};
  for (const std::uint64_t v : values) {
    locked.record_ns(v);
    plain.record_ns_single_writer(v);
  }
  locked.record(std::chrono::nanoseconds(-3));
  plain.record_single_writer(std::chrono::nanoseconds(-3));
  locked.record(std::chrono::microseconds(3));
  plain.record_single_writer(std::chrono::microseconds(3));
  const auto a = locked.snapshot(), b = plain.snapshot();
  EXPECT_EQ(b.count, 9u);
  EXPECT_EQ(b.counts, a.counts);
  EXPECT_EQ(b.sum_ns, a.sum_ns);
  EXPECT_EQ(b.min_ns, 0u);
  EXPECT_EQ(b.max_ns, log_histogram::highest_trackable_ns);
  EXPECT_EQ(b.clamped, 1u);
  EXPECT_EQ(b.clamped, a.clamped);
}

TEST(log_histogram, SmallValuesAreExact) {
  log_histogram h;  // P = 6: everything below 128 has a bucket of its own
  std::vector<std::uint64_t> values;
  for (std::uint64_t v = 0; v < 128; ++v) {
    h.record_ns(v);
    values.push_back(v);
  }
  for (const double q : quantiles) EXPECT_EQ(h.value_at_quantile(q), exact_quantile(values, q)) << q;
}

TEST(log_histogram, NegativeDurationsRecordAsZero) {
  log_histogram h;
  h.record(duration(-5));
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.sum_ns(), 0u);
  EXPECT_EQ(h.max_ns(), 0u);
}

TEST(log_histogram, QuantilesStayWithinTrueMinAndMax) {
  log_histogram h;
  h.record_ns(1'000'003);  // the bucket's midpoint is elsewhere
  for (const double q : quantiles) EXPECT_EQ(h.value_at_quantile(q), 1'000'003u) << q;
  h.record_ns(1'000'001);
  for (const double q : quantiles) {
    EXPECT_GE(h.value_at_quantile(q), 1'000'001u);
    EXPECT_LE(h.value_at_quantile(q), 1'000'003u);
  }
  EXPECT_EQ(h.value_at_quantile(std::numeric_limits<double>::quiet_NaN()), 1'000'001u);
  EXPECT_EQ(h.value_at_quantile(-1.0), 1'000'001u);
  EXPECT_EQ(h.value_at_quantile(2.0), 1'000'003u);
}

TEST(log_histogram, ValuesAboveTheRangeClampToTheTopBucketAndAreCounted) {
  log_histogram h;
  h.record_ns(std::numeric_limits<std::uint64_t>::max());
  h.record(std::chrono::hours(10));
  h.record(duration::max());
  h.record_ns(log_histogram::highest_trackable_ns);  // in range: not clamped
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.clamped_count(), 3u);
  EXPECT_EQ(h.max_ns(), log_histogram::highest_trackable_ns);
  EXPECT_EQ(h.sum_ns(), 4 * log_histogram::highest_trackable_ns);
  EXPECT_EQ(h.value_at_quantile(1.0), log_histogram::highest_trackable_ns);
  EXPECT_EQ(h.value_at_quantile(0.5), log_histogram::highest_trackable_ns);
  EXPECT_EQ(h.snapshot().clamped, 3u);
}

// ---- distributions -------------------------------------------------------

class distribution_test : public ::testing::TestWithParam<unsigned> {};

TEST_P(distribution_test, UniformQuantilesWithinDocumentedError) {
  log_histogram h(GetParam());
  std::mt19937_64 rng(20240601);
  std::uniform_int_distribution<std::uint64_t> dist(1, 1'000'000'000);
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 100'000; ++i) {
    values.push_back(dist(rng));
    h.record_ns(values.back());
  }
  expect_quantiles_within_bound(h, values);
}

TEST_P(distribution_test, ExponentialQuantilesWithinDocumentedError) {
  log_histogram h(GetParam());
  std::mt19937_64 rng(7);
  std::exponential_distribution<double> dist(1.0 / 2'000'000.0);  // mean 2 ms
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 100'000; ++i) {
    values.push_back(static_cast<std::uint64_t>(dist(rng)));
    h.record_ns(values.back());
  }
  expect_quantiles_within_bound(h, values);
}

TEST_P(distribution_test, WideLogUniformQuantilesWithinDocumentedError) {
  log_histogram h(GetParam());
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<double> exponent(0.0, 13.0);  // 1 ns .. 10^13 ns
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 50'000; ++i) {
    values.push_back(static_cast<std::uint64_t>(std::pow(10.0, exponent(rng))));
    h.record_ns(values.back());
  }
  expect_quantiles_within_bound(h, values);
}

INSTANTIATE_TEST_SUITE_P(precisions, distribution_test,
                         ::testing::Values(log_histogram::default_precision, log_histogram::three_digits_precision));

TEST(histogram_snapshot, CountAtOrBelowNeverOvercountsAndMissesOnlyOneBucket) {
  log_histogram h;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<std::uint64_t> dist(1, 100'000'000);
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 20'000; ++i) {
    values.push_back(dist(rng));
    h.record_ns(values.back());
  }
  std::sort(values.begin(), values.end());
  const auto s = h.snapshot();
  for (const std::uint64_t x : {100u, 1'000u, 100'000u, 250'000u, 1'000'000u, 25'000'000u, 99'999'999u, 100'000'000u}) {
    const auto exact_le = [&](double bound) {
      return static_cast<std::uint64_t>(
          std::upper_bound(values.begin(), values.end(), bound,
                           [](double b, std::uint64_t v) { return b < static_cast<double>(v); }) -
          values.begin());
    };
    const std::uint64_t got = s.count_at_or_below(x);
    EXPECT_LE(got, exact_le(static_cast<double>(x))) << x;
    EXPECT_GE(got, exact_le(static_cast<double>(x) * (1.0 - 2.0 * h.relative_error()))) << x;
  }
  EXPECT_EQ(s.count_at_or_below(log_histogram::highest_trackable_ns), s.count);

  // The one-pass form gives exactly the same numbers, bound by bound.
  const std::vector<std::uint64_t> bounds = {
      0,         100,        1'000,      100'000,     250'000,
      1'000'000, 25'000'000, 99'999'999, 100'000'000, log_histogram::highest_trackable_ns};
  std::vector<std::uint64_t> cumulative(bounds.size(), 7);
  s.counts_at_or_below(bounds, cumulative);
  for (std::size_t k = 0; k < bounds.size(); ++k) EXPECT_EQ(cumulative[k], s.count_at_or_below(bounds[k])) << bounds[k];
}

// ---- merge and reset -----------------------------------------------------

TEST(log_histogram, MergeEqualsRecordingEverythingInOne) {
  log_histogram a, b, all;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint64_t> dist(1, 10'000'000);
  for (int i = 0; i < 10'000; ++i) {
    const std::uint64_t v = dist(rng);
    (i % 3 == 0 ? a : b).record_ns(v);
    all.record_ns(v);
  }
  b.record_ns(std::numeric_limits<std::uint64_t>::max());
  all.record_ns(std::numeric_limits<std::uint64_t>::max());
  a.merge(b);
  const auto merged = a.snapshot();
  const auto expected = all.snapshot();
  EXPECT_EQ(merged.counts, expected.counts);
  EXPECT_EQ(merged.count, expected.count);
  EXPECT_EQ(merged.sum_ns, expected.sum_ns);
  EXPECT_EQ(merged.min_ns, expected.min_ns);
  EXPECT_EQ(merged.max_ns, expected.max_ns);
  EXPECT_EQ(merged.clamped, 1u);
  EXPECT_EQ(b.count(), 6'667u);  // the source is left alone
}

TEST(log_histogram, MergeIntoItselfDoubles) {
  log_histogram h;
  h.record_ns(5);
  h.record_ns(500'000);
  h.merge(h);
  EXPECT_EQ(h.count(), 4u);
  EXPECT_EQ(h.sum_ns(), 2u * 500'005u);
  EXPECT_EQ(h.min_ns(), 5u);
  EXPECT_EQ(h.max_ns(), 500'000u);
}

TEST(log_histogram, MergeOfEmptyChangesNothing) {
  log_histogram a, empty;
  a.record_ns(42);
  a.merge(empty);
  EXPECT_EQ(a.count(), 1u);
  EXPECT_EQ(a.min_ns(), 42u);
  EXPECT_EQ(a.max_ns(), 42u);
  empty.merge(a);
  EXPECT_EQ(empty.min_ns(), 42u);
  EXPECT_EQ(empty.max_ns(), 42u);
}

TEST(log_histogram, MergeRejectsAnotherPrecision) {
  log_histogram a(6), b(9);
  b.record_ns(1);
  EXPECT_THROW(a.merge(b), std::invalid_argument);
  EXPECT_THROW(a.merge(b.snapshot()), std::invalid_argument);
  auto s = a.snapshot();
  EXPECT_THROW(s.merge(b.snapshot()), std::invalid_argument);
}

TEST(histogram_snapshot, MergeCombinesSnapshots) {
  log_histogram a, b;
  a.record_ns(10);
  a.record_ns(1'000);
  b.record_ns(7);
  b.record_ns(1'000'000);
  auto s = a.snapshot();
  s.merge(b.snapshot());
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.sum_ns, 1'001'017u);
  EXPECT_EQ(s.min_ns, 7u);
  EXPECT_EQ(s.max_ns, 1'000'000u);
  histogram_snapshot empty;
  empty.merge(s);
  EXPECT_EQ(empty.min_ns, 7u);
  EXPECT_EQ(empty.counts, s.counts);
}

TEST(log_histogram, ResetEmptiesEverything) {
  log_histogram h;
  h.record_ns(3);
  h.record_ns(std::numeric_limits<std::uint64_t>::max());
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.sum_ns(), 0u);
  EXPECT_EQ(h.min_ns(), 0u);
  EXPECT_EQ(h.max_ns(), 0u);
  EXPECT_EQ(h.clamped_count(), 0u);
  h.record_ns(77);
  EXPECT_EQ(h.min_ns(), 77u);
  EXPECT_EQ(h.max_ns(), 77u);
}

// ---- concurrency ---------------------------------------------------------

std::uint64_t thread_value(int thread, int i) {
  return static_cast<std::uint64_t>(thread + 1) * 1'000 + static_cast<std::uint64_t>(i) * 37;
}

TEST(log_histogram, ConcurrentRecordingSumsExactly) {
  constexpr int threads = 4;
  constexpr int per_thread = 50'000;
  log_histogram h;
  log_histogram sequential;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&h, t] {
      for (int i = 0; i < per_thread; ++i) h.record_ns(thread_value(t, i));
    });
  }
  for (auto& th : pool) th.join();
  std::uint64_t sum = 0;
  for (int t = 0; t < threads; ++t) {
    for (int i = 0; i < per_thread; ++i) {
      sum += thread_value(t, i);
      sequential.record_ns(thread_value(t, i));
    }
  }
  EXPECT_EQ(h.count(), std::uint64_t{threads} * per_thread);
  EXPECT_EQ(h.sum_ns(), sum);
  EXPECT_EQ(h.min_ns(), thread_value(0, 0));
  EXPECT_EQ(h.max_ns(), thread_value(threads - 1, per_thread - 1));
  EXPECT_EQ(h.snapshot().counts, sequential.snapshot().counts);
}

TEST(log_histogram, SnapshotsTakenWhileRecordingAreSelfConsistent) {
  log_histogram h;
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&h, t] {
      for (int i = 0; i < 20'000; ++i) h.record_ns(thread_value(t, i));
    });
  }
  std::thread reader([&] {
    while (!done.load()) {
      const auto s = h.snapshot();
      if (s.count == 0) continue;
      for (const double q : {0.0, 0.5, 0.99, 1.0}) {
        const auto v = s.value_at_quantile(q);
        ASSERT_LE(s.min_ns, v);
        ASSERT_LE(v, s.max_ns);
      }
      ASSERT_LE(s.count_at_or_below(1'000'000'000), s.count);
    }
  });
  for (auto& th : writers) th.join();
  done.store(true);
  reader.join();
  EXPECT_EQ(h.count(), 60'000u);
}

}  // namespace
}  // namespace hourglass
