// A bounded-memory, lock-free latency histogram (HdrHistogram-like).
//
// Values are non-negative integer nanoseconds. Buckets are log-linear: each
// power of two [2^k, 2^(k+1)) is split into 2^P equal sub-buckets of width
// 2^(k-P), where P is the precision (bits). Values below 2^(P+1) are counted
// exactly (width-1 buckets).
//
// Error bound:
// - A value v is reported as its bucket's midpoint r (lower + width/2), so
//       |r - v| <= v * 2^-(P+1).
//   P = 6 (default_precision):       <= 0.79 % relative error, 2,496 buckets (~20 KiB).
//   P = 9 (three_digits_precision):  <= 0.098 % (3 significant digits), 18,432 buckets (~144 KiB).
// - value_at_quantile(q) returns the representative of the bucket holding the
//   nearest-rank value (rank max(1, ceil(q * count)) in ascending order), so it
//   is within that bound of the exact quantile. It is then clamped to
//   [min, max]: never below the true minimum, never above the true maximum.
// - count, sum, min and max are exact (up to clamping, below).
//
// Range: 0 .. highest_trackable_ns = 2^44 - 1 ns (~17,592 s, ~4.9 h). A larger
// value is clamped to highest_trackable_ns: it lands in the top bucket, counts
// in count(), adds highest_trackable_ns to the sum, and is counted in
// clamped_count(). Negative durations are recorded as 0. The sum wraps modulo
// 2^64 ns (584 years of accumulated time; a million clamped values).
//
// Thread safety: record/record_ns/merge may be called from any number of
// threads concurrently; they are lock-free (one relaxed fetch_add on the
// bucket and the sum, plus a load, and rarely a CAS, for min and max).
// record_single_writer/record_ns_single_writer are for a histogram that one
// thread at a time records into (nothing else records, merges or resets
// meanwhile; a mutex or a join orders successive writers): they update with a
// plain load and store, no locked instruction. Readers may still run.
// Readers (count, snapshot, value_at_quantile, ...) may run concurrently with
// recorders and see a state that is not an instant: each field is read
// separately. snapshot() derives its count from the buckets and clamps min/max
// into the lowest/highest non-empty buckets, so a snapshot is always
// self-consistent even when taken mid-recording. reset() must not race with
// recorders if an exact zero is needed (concurrent records may survive it).
//
// Memory ordering: all atomics are relaxed. The histogram publishes nothing;
// use an external happens-before (a join, a mutex) to read exact final values.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "hourglass/time.hpp"

namespace hourglass {

// The bucket geometry for a given precision: pure arithmetic, no state but P.
class log_bucket_layout {
 public:
  static constexpr unsigned min_precision = 1;
  static constexpr unsigned max_precision = 12;
  static constexpr unsigned default_precision = 6;       // <= 0.79 % relative error
  static constexpr unsigned three_digits_precision = 9;  // <= 0.098 %: 3 significant digits
  static constexpr unsigned value_bits = 44;
  static constexpr std::uint64_t highest_trackable_ns = (std::uint64_t{1} << value_bits) - 1;

  // Throws std::invalid_argument unless min_precision <= precision <= max_precision.
  explicit log_bucket_layout(unsigned precision);

  unsigned precision() const noexcept { return precision_; }
  // The bound on |reported - true| / true: 2^-(P+1).
  double relative_error() const noexcept;
  std::size_t bucket_count() const noexcept;

  // Bucket of `ns`; `ns` must be <= highest_trackable_ns.
  std::size_t index_of(std::uint64_t ns) const noexcept;
  // Smallest and largest value (inclusive) that bucket `i` holds.
  std::uint64_t lower_bound(std::size_t i) const noexcept;
  std::uint64_t upper_bound(std::size_t i) const noexcept;
  // The value reported for bucket `i`: lower + width / 2.
  std::uint64_t representative(std::size_t i) const noexcept;

  friend bool operator==(const log_bucket_layout&, const log_bucket_layout&) = default;

 private:
  unsigned precision_;
};

// A plain, copyable copy of a histogram, for use off the hot path.
struct histogram_snapshot {
  explicit histogram_snapshot(unsigned precision = log_bucket_layout::default_precision);

  log_bucket_layout layout;
  std::vector<std::uint64_t> counts;  // one per bucket, layout.bucket_count() long
  std::uint64_t count = 0;            // == sum of counts
  std::uint64_t sum_ns = 0;
  std::uint64_t min_ns = 0;   // 0 when empty
  std::uint64_t max_ns = 0;   // 0 when empty
  std::uint64_t clamped = 0;  // values that were above highest_trackable_ns

  // Nearest-rank quantile, q clamped to [0, 1] (NaN is 0); 0 when empty.
  std::uint64_t value_at_quantile(double q) const noexcept;
  // Number of values in buckets whose largest value is <= ns. Every counted
  // value is <= ns; values in (ns - width, ns], width <= ns * 2^-P, of the one
  // bucket straddling ns are not counted (they count toward the next bound).
  std::uint64_t count_at_or_below(std::uint64_t ns) const noexcept;
  // count_at_or_below(bounds[k]) into out[k] for every k, in one pass over the
  // buckets (what /metrics renders). `bounds` ascending; out.size() >= bounds.size().
  void counts_at_or_below(std::span<const std::uint64_t> bounds, std::span<std::uint64_t> out) const noexcept;
  double mean_ns() const noexcept;
  // Adds `other` into this. Throws std::invalid_argument on a precision mismatch.
  void merge(const histogram_snapshot& other);
};

class log_histogram {
 public:
  static constexpr unsigned default_precision = log_bucket_layout::default_precision;
  static constexpr unsigned three_digits_precision = log_bucket_layout::three_digits_precision;
  static constexpr std::uint64_t highest_trackable_ns = log_bucket_layout::highest_trackable_ns;

  // Throws std::invalid_argument for a precision outside [1, 12].
  explicit log_histogram(unsigned precision = default_precision);
  log_histogram(const log_histogram&) = delete;
  log_histogram& operator=(const log_histogram&) = delete;

  void record(duration d) noexcept;
  void record_ns(std::uint64_t ns) noexcept;
  // One writer at a time only (see "Thread safety").
  void record_single_writer(duration d) noexcept;
  void record_ns_single_writer(std::uint64_t ns) noexcept;

  std::uint64_t count() const noexcept;  // sums the buckets: O(buckets)
  std::uint64_t sum_ns() const noexcept;
  std::uint64_t min_ns() const noexcept;  // 0 when empty
  std::uint64_t max_ns() const noexcept;  // 0 when empty
  std::uint64_t clamped_count() const noexcept;
  // Same as snapshot().value_at_quantile(q) (allocates).
  std::uint64_t value_at_quantile(double q) const;

  // Adds `other`'s values into this one (other may be *this, doubling it).
  // Throws std::invalid_argument when the precisions differ.
  void merge(const log_histogram& other);
  void merge(const histogram_snapshot& other);
  void reset() noexcept;
  histogram_snapshot snapshot() const;

  const log_bucket_layout& layout() const noexcept { return layout_; }
  unsigned precision() const noexcept { return layout_.precision(); }
  double relative_error() const noexcept { return layout_.relative_error(); }

 private:
  void note_extremes(std::uint64_t lo, std::uint64_t hi) noexcept;

  log_bucket_layout layout_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  // Written on every record: kept together on their own line (the class is
  // 64-aligned, so its size is padded and no neighbour shares this line).
  alignas(64) std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> min_{~std::uint64_t{0}};
  std::atomic<std::uint64_t> max_{0};
  std::atomic<std::uint64_t> clamped_{0};
};

}  // namespace hourglass
