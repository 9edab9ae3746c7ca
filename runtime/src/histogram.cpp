#include "hourglass/histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace hourglass {
namespace {

constexpr auto relaxed = std::memory_order_relaxed;
constexpr std::uint64_t empty_min = ~std::uint64_t{0};

unsigned checked_precision(unsigned p) {
  if (p < log_bucket_layout::min_precision || p > log_bucket_layout::max_precision) {
    throw std::invalid_argument("hourglass::log_histogram: precision must be in [1, 12], got " + std::to_string(p));
  }
  return p;
}

void require_same_layout(const log_bucket_layout& a, const log_bucket_layout& b) {
  if (!(a == b)) {
    throw std::invalid_argument("hourglass::log_histogram: cannot merge histograms of precision " +
                                std::to_string(b.precision()) + " into precision " + std::to_string(a.precision()));
  }
}

}  // namespace

// ---- log_bucket_layout ---------------------------------------------------
//
// index(v) = v                                   for v < 2^P
//          = (k - P + 1) * 2^P + (v >> (k - P)) - 2^P   otherwise, k = floor(log2 v)
// which is continuous: the linear region [0, 2^P) is followed by one block of
// 2^P sub-buckets per power of two, starting with [2^P, 2^(P+1)) at width 1.

log_bucket_layout::log_bucket_layout(unsigned precision) : precision_(checked_precision(precision)) {}

double log_bucket_layout::relative_error() const noexcept { return std::ldexp(1.0, -static_cast<int>(precision_) - 1); }

std::size_t log_bucket_layout::bucket_count() const noexcept { return index_of(highest_trackable_ns) + 1; }

std::size_t log_bucket_layout::index_of(std::uint64_t ns) const noexcept {
  const std::uint64_t sub = std::uint64_t{1} << precision_;
  if (ns < sub) return static_cast<std::size_t>(ns);
  const unsigned k = static_cast<unsigned>(std::bit_width(ns)) - 1;
  const unsigned shift = k - precision_;
  return static_cast<std::size_t>((std::uint64_t{shift + 1} << precision_) + (ns >> shift) - sub);
}

std::uint64_t log_bucket_layout::lower_bound(std::size_t i) const noexcept {
  const std::uint64_t sub = std::uint64_t{1} << precision_;
  if (i < sub) return i;
  const unsigned shift = static_cast<unsigned>(i >> precision_) - 1;
  return ((i & (sub - 1)) + sub) << shift;
}

std::uint64_t log_bucket_layout::upper_bound(std::size_t i) const noexcept {
  const std::uint64_t sub = std::uint64_t{1} << precision_;
  if (i < sub) return i;
  const unsigned shift = static_cast<unsigned>(i >> precision_) - 1;
  return lower_bound(i) + (std::uint64_t{1} << shift) - 1;
}

std::uint64_t log_bucket_layout::representative(std::size_t i) const noexcept {
  const std::uint64_t lo = lower_bound(i);
  return lo + (upper_bound(i) - lo + 1) / 2;
}

// ---- histogram_snapshot --------------------------------------------------

histogram_snapshot::histogram_snapshot(unsigned precision) : layout(precision), counts(layout.bucket_count(), 0) {}

std::uint64_t histogram_snapshot::value_at_quantile(double q) const noexcept {
  if (count == 0) return 0;
  if (!(q > 0.0)) return min_ns;  // also NaN
  if (q >= 1.0) return max_ns;
  const double wanted = std::ceil(q * static_cast<double>(count));
  std::uint64_t rank = wanted < 1.0 ? 1 : static_cast<std::uint64_t>(wanted);
  rank = std::min(rank, count);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= rank) return std::clamp(layout.representative(i), min_ns, max_ns);
  }
  return max_ns;
}

std::uint64_t histogram_snapshot::count_at_or_below(std::uint64_t ns) const noexcept {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < counts.size() && layout.upper_bound(i) <= ns; ++i) total += counts[i];
  return total;
}

void histogram_snapshot::counts_at_or_below(std::span<const std::uint64_t> bounds,
                                            std::span<std::uint64_t> out) const noexcept {
  std::uint64_t total = 0;
  std::size_t i = 0;
  for (std::size_t k = 0; k < bounds.size() && k < out.size(); ++k) {
    while (i < counts.size() && layout.upper_bound(i) <= bounds[k]) total += counts[i++];
    out[k] = total;
  }
}

double histogram_snapshot::mean_ns() const noexcept {
  return count == 0 ? 0.0 : static_cast<double>(sum_ns) / static_cast<double>(count);
}

void histogram_snapshot::merge(const histogram_snapshot& other) {
  require_same_layout(layout, other.layout);
  if (other.count == 0) return;
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
  min_ns = count == 0 ? other.min_ns : std::min(min_ns, other.min_ns);
  max_ns = count == 0 ? other.max_ns : std::max(max_ns, other.max_ns);
  count += other.count;
  sum_ns += other.sum_ns;
  clamped += other.clamped;
}

// ---- log_histogram -------------------------------------------------------

log_histogram::log_histogram(unsigned precision)
    : layout_(precision), buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(layout_.bucket_count())) {}

void log_histogram::record(duration d) noexcept {
  record_ns(d.count() <= 0 ? 0 : static_cast<std::uint64_t>(d.count()));
}

void log_histogram::record_ns(std::uint64_t ns) noexcept {
  if (ns > highest_trackable_ns) {
    ns = highest_trackable_ns;
    clamped_.fetch_add(1, relaxed);
  }
  buckets_[layout_.index_of(ns)].fetch_add(1, relaxed);
  sum_.fetch_add(ns, relaxed);
  note_extremes(ns, ns);
}

void log_histogram::record_single_writer(duration d) noexcept {
  record_ns_single_writer(d.count() <= 0 ? 0 : static_cast<std::uint64_t>(d.count()));
}

void log_histogram::record_ns_single_writer(std::uint64_t ns) noexcept {
  const auto bump = [](std::atomic<std::uint64_t>& a, std::uint64_t by) { a.store(a.load(relaxed) + by, relaxed); };
  if (ns > highest_trackable_ns) {
    ns = highest_trackable_ns;
    bump(clamped_, 1);
  }
  bump(buckets_[layout_.index_of(ns)], 1);
  bump(sum_, ns);
  if (ns < min_.load(relaxed)) min_.store(ns, relaxed);
  if (ns > max_.load(relaxed)) max_.store(ns, relaxed);
}

void log_histogram::note_extremes(std::uint64_t lo, std::uint64_t hi) noexcept {
  std::uint64_t cur = min_.load(relaxed);
  while (lo < cur && !min_.compare_exchange_weak(cur, lo, relaxed)) {
  }
  cur = max_.load(relaxed);
  while (hi > cur && !max_.compare_exchange_weak(cur, hi, relaxed)) {
  }
}

std::uint64_t log_histogram::count() const noexcept {
  std::uint64_t total = 0;
  for (std::size_t i = 0, n = layout_.bucket_count(); i < n; ++i) total += buckets_[i].load(relaxed);
  return total;
}

std::uint64_t log_histogram::sum_ns() const noexcept { return sum_.load(relaxed); }

std::uint64_t log_histogram::min_ns() const noexcept {
  const std::uint64_t m = min_.load(relaxed);
  return m == empty_min ? 0 : m;
}

std::uint64_t log_histogram::max_ns() const noexcept { return max_.load(relaxed); }

std::uint64_t log_histogram::clamped_count() const noexcept { return clamped_.load(relaxed); }

std::uint64_t log_histogram::value_at_quantile(double q) const { return snapshot().value_at_quantile(q); }

void log_histogram::merge(const log_histogram& other) {
  require_same_layout(layout_, other.layout_);
  merge(other.snapshot());  // a copy first, so merging into itself is well defined
}

void log_histogram::merge(const histogram_snapshot& other) {
  require_same_layout(layout_, other.layout);
  if (other.count == 0) return;
  for (std::size_t i = 0; i < other.counts.size(); ++i) {
    if (other.counts[i] != 0) buckets_[i].fetch_add(other.counts[i], relaxed);
  }
  sum_.fetch_add(other.sum_ns, relaxed);
  if (other.clamped != 0) clamped_.fetch_add(other.clamped, relaxed);
  note_extremes(other.min_ns, other.max_ns);
}

void log_histogram::reset() noexcept {
  for (std::size_t i = 0, n = layout_.bucket_count(); i < n; ++i) buckets_[i].store(0, relaxed);
  sum_.store(0, relaxed);
  clamped_.store(0, relaxed);
  min_.store(empty_min, relaxed);
  max_.store(0, relaxed);
}

histogram_snapshot log_histogram::snapshot() const {
  histogram_snapshot s(layout_.precision());
  std::size_t lowest = s.counts.size();
  std::size_t highest = 0;
  for (std::size_t i = 0; i < s.counts.size(); ++i) {
    const std::uint64_t c = buckets_[i].load(relaxed);
    s.counts[i] = c;
    if (c == 0) continue;
    s.count += c;
    lowest = std::min(lowest, i);
    highest = i;
  }
  s.sum_ns = sum_.load(relaxed);
  s.clamped = clamped_.load(relaxed);
  if (s.count != 0) {
    // Mid-recording, min/max may lag the buckets (or lead them): keep them in
    // the extreme non-empty buckets so quantiles stay within [min, max].
    s.min_ns = std::clamp(min_.load(relaxed), layout_.lower_bound(lowest), layout_.upper_bound(lowest));
    s.max_ns = std::clamp(max_.load(relaxed), layout_.lower_bound(highest), layout_.upper_bound(highest));
  }
  return s;
}

}  // namespace hourglass
