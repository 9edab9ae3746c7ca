// GET /metrics: the daemon's whole page, assembled in one place
// (core::metrics_page, metrics_page.cpp), and kept for a short interval.
//
// The page, in order, every part writing through one exposition_writer
// (hourglass/exposition.hpp) into one string: the executor's registry
// (render_prometheus), the async backend's families (the memory store's size,
// or the fleet's series), the upstreams' (circuit breakers, hedges), and the
// connection gauges. Every series: docs/reference/metrics.md.
//
// The cache: a page costs ~1.4 ms of CPU and ~12 KB, so a client pipelining
// scrapes could keep an I/O thread rendering and nothing else. A rendered page
// is kept for `interval` (--metrics-cache, default 1 s) on the server's clock:
// a scrape less than `interval` after the last rendering gets the same bytes;
// the first at or after it renders anew. Its values are at most `interval`
// old. An interval of zero keeps nothing: every scrape renders.
//
// Thread safety: get() may be called from any number of threads (the I/O
// threads). One renders, holding the cache's mutex; the others wait for it and
// take its page, so no more than one page is rendered per interval. With an
// interval of zero nothing is locked and scrapes render side by side.
#pragma once

#include <mutex>
#include <string>
#include <utility>

#include "hourglass/clock.hpp"
#include "hourglass/time.hpp"

namespace hourglass::server::detail {

class metrics_page_cache {
 public:
  // `clk` must outlive the cache. A negative interval counts as zero.
  metrics_page_cache(const hourglass::clock& clk, duration interval) noexcept : clk_(clk), interval_(interval) {}
  metrics_page_cache(const metrics_page_cache&) = delete;
  metrics_page_cache& operator=(const metrics_page_cache&) = delete;

  // The page rendered by render() (a std::string()), or the one kept from a
  // rendering less than the interval ago. A render() that throws keeps nothing.
  template <class Render>
  std::string get(Render&& render) {
    if (interval_ <= duration::zero()) return std::forward<Render>(render)();
    std::lock_guard lock(mu_);
    const time_point now = clk_.now();
    if (!kept_ || now < rendered_at_ || now - rendered_at_ >= interval_) {
      page_ = std::forward<Render>(render)();
      rendered_at_ = now;
      kept_ = true;
    }
    return page_;
  }

  duration interval() const noexcept { return interval_; }

 private:
  const hourglass::clock& clk_;
  const duration interval_;
  std::mutex mu_;
  bool kept_ = false;  // guarded by mu_, as the two below
  time_point rendered_at_{};
  std::string page_;
};

}  // namespace hourglass::server::detail
