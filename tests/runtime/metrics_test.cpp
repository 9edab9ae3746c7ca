#include "hourglass/metrics.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace hourglass {
namespace {

using namespace std::chrono_literals;

// ---- a tiny text-format 0.0.4 parser that enforces what we promise ---------

struct parsed_sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct parsed_family {
  std::string name, help, type;
  std::vector<parsed_sample> samples;
};

struct exposition {
  std::vector<parsed_family> families;

  const parsed_family* family(std::string_view name) const {
    for (const auto& f : families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
  // The value of the one sample with exactly these labels; NaN if absent.
  double value(std::string_view name, const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& f : families) {
      for (const auto& s : f.samples) {
        if (s.name == name && s.labels == labels) return s.value;
      }
    }
    return std::nan("");
  }
};

bool is_name_char(char c, bool first, bool colon_ok) {
  const bool alpha = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (colon_ok && c == ':');
  return first ? alpha : alpha || std::isdigit(static_cast<unsigned char>(c));
}

bool read_name(std::string_view& in, std::string& out, bool colon_ok) {
  std::size_t n = 0;
  while (n < in.size() && is_name_char(in[n], n == 0, colon_ok)) ++n;
  if (n == 0) return false;
  out.assign(in.substr(0, n));
  in.remove_prefix(n);
  return true;
}

bool parse_value(std::string_view text, double& out) {
  if (text == "+Inf") return out = HUGE_VAL, true;
  if (text == "-Inf") return out = -HUGE_VAL, true;
  if (text == "NaN") return out = std::nan(""), true;
  const std::string s(text);
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size();
}

// The family a sample belongs to: histograms own _bucket/_sum/_count.
bool belongs_to(const parsed_family& f, std::string_view sample) {
  if (sample == f.name) return f.type != "histogram";
  if (f.type != "histogram") return false;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (sample == f.name + suffix) return true;
  }
  return false;
}

exposition parse_exposition(std::string_view text) {
  exposition out;
  if (text.empty() || text.back() != '\n') ADD_FAILURE() << "exposition must end with a line feed";
  std::set<std::string> seen;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    ++line_no;
    if (line.empty()) continue;
    if (line.starts_with("# HELP ")) {
      line.remove_prefix(7);
      std::string name;
      if (!read_name(line, name, true) || !line.starts_with(' ')) {
        ADD_FAILURE() << "bad HELP at line " << line_no;
        continue;
      }
      if (!seen.insert(name).second) ADD_FAILURE() << "family " << name << " is not contiguous / repeated";
      out.families.push_back({name, std::string(line.substr(1)), "", {}});
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      line.remove_prefix(7);
      std::string name;
      if (!read_name(line, name, true) || !line.starts_with(' ')) {
        ADD_FAILURE() << "bad TYPE at line " << line_no;
        continue;
      }
      const std::string type(line.substr(1));
      if (out.families.empty() || out.families.back().name != name || !out.families.back().type.empty()) {
        ADD_FAILURE() << "TYPE for " << name << " must follow its HELP, once, line " << line_no;
        continue;
      }
      if (type != "counter" && type != "gauge" && type != "histogram") ADD_FAILURE() << "type " << type;
      if (type == "counter" && !name.ends_with("_total")) ADD_FAILURE() << "counter without _total: " << name;
      out.families.back().type = type;
      continue;
    }
    if (line.starts_with('#')) continue;  // other comments are allowed
    parsed_sample s;
    if (!read_name(line, s.name, true)) {
      ADD_FAILURE() << "bad metric name at line " << line_no;
      continue;
    }
    if (line.starts_with('{')) {
      line.remove_prefix(1);
      while (!line.starts_with('}')) {
        std::string key, value;
        if (!read_name(line, key, false) || !line.starts_with("=\"")) {
          ADD_FAILURE() << "bad label at line " << line_no;
          return out;
        }
        line.remove_prefix(2);
        bool closed = false;
        while (!line.empty()) {
          const char c = line.front();
          line.remove_prefix(1);
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\n') ADD_FAILURE() << "raw line feed in label value";
          if (c != '\\') {
            value.push_back(c);
            continue;
          }
          const char e = line.empty() ? '\0' : line.front();
          line.remove_prefix(line.empty() ? 0 : 1);
          if (e == '\\') value.push_back('\\');
          else if (e == '"') value.push_back('"');
          else if (e == 'n') value.push_back('\n');
          else ADD_FAILURE() << "bad escape \\" << e << " at line " << line_no;
        }
        if (!closed) {
          ADD_FAILURE() << "unterminated label value at line " << line_no;
          return out;
        }
        if (!s.labels.emplace(key, value).second) ADD_FAILURE() << "duplicate label " << key;
        if (line.starts_with(',')) line.remove_prefix(1);
      }
      line.remove_prefix(1);
    }
    if (!line.starts_with(' ') || !parse_value(line.substr(1), s.value)) {
      ADD_FAILURE() << "bad value at line " << line_no << ": '" << line << "'";
      continue;
    }
    if (out.families.empty() || out.families.back().type.empty() || !belongs_to(out.families.back(), s.name)) {
      ADD_FAILURE() << "sample " << s.name << " before its HELP/TYPE or outside its family, line " << line_no;
      continue;
    }
    out.families.back().samples.push_back(std::move(s));
  }
  // Histograms: cumulative, ascending le, ending with +Inf == _count, one _sum.
  for (const auto& f : out.families) {
    if (f.type != "histogram") continue;
    double previous_le = -HUGE_VAL, previous_count = 0, inf_count = -1, count = -1;
    int sums = 0;
    for (const auto& s : f.samples) {
      if (s.name == f.name + "_bucket") {
        double le = 0;
        EXPECT_TRUE(s.labels.contains("le") && parse_value(s.labels.at("le"), le)) << f.name;
        EXPECT_GT(le, previous_le) << f.name << " le not ascending";
        EXPECT_GE(s.value, previous_count) << f.name << " buckets not cumulative";
        EXPECT_LT(inf_count, 0) << f.name << " bucket after +Inf";
        previous_le = le;
        previous_count = s.value;
        if (std::isinf(le)) inf_count = s.value;
      } else if (s.name == f.name + "_count") {
        count = s.value;
      } else {
        ++sums;
      }
    }
    EXPECT_GE(inf_count, 0) << f.name << " has no +Inf bucket";
    EXPECT_EQ(inf_count, count) << f.name;
    EXPECT_EQ(sums, 1) << f.name;
  }
  return out;
}

// ---- handlers ------------------------------------------------------------

TEST(metrics, HandlerReferencesAreStableAndShared) {
  metrics m;
  handler_metrics& a = m.handler("a");
  handler_metrics& b = m.handler("b");
  EXPECT_NE(&a, &b);
  for (int i = 0; i < 300; ++i) m.handler("h" + std::to_string(i));  // grows the registry
  EXPECT_EQ(&m.handler("a"), &a);
  EXPECT_EQ(&m.handler(std::string("b")), &b);
  EXPECT_EQ(a.name, "a");
}

TEST(metrics, HandlerCapFoldsIntoOther) {
  metrics m(metrics_options{.max_handlers = 3});
  handler_metrics& a = m.handler("a");
  m.handler("b");
  m.handler("c");
  EXPECT_EQ(m.handler_count(), 3u);
  handler_metrics& d = m.handler("d");
  EXPECT_EQ(d.name, "other");
  EXPECT_EQ(&m.handler("e"), &d);
  EXPECT_EQ(&m.handler("other"), &d);
  EXPECT_EQ(&m.handler("a"), &a);
  EXPECT_EQ(m.handler_count(), 4u);

  m.on_admitted(m.handler("d"), 1s);
  m.on_admitted(m.handler("zzz"), 1s);
  const auto text = render_prometheus(m.snapshot());
  const auto e = parse_exposition(text);
  EXPECT_EQ(e.value("hourglass_jobs_admitted_total", {{"handler", "other"}}), 2.0);
  EXPECT_TRUE(std::isnan(e.value("hourglass_jobs_admitted_total", {{"handler", "d"}})));
  EXPECT_EQ(text.find("zzz"), std::string::npos);
}

TEST(metrics, HandlerNamedOtherDoesNotUseASlot) {
  metrics m(metrics_options{.max_handlers = 1});
  handler_metrics& other = m.handler("other");
  handler_metrics& a = m.handler("a");
  EXPECT_NE(&other, &a);
  EXPECT_EQ(&m.handler("b"), &other);
}

TEST(metrics, InvalidUtf8NamesFoldIntoOther) {
  metrics m;
  EXPECT_EQ(m.handler("bad\xff").name, "other");
  EXPECT_EQ(m.handler("\xc0\xaf").name, "other");           // overlong
  EXPECT_EQ(m.handler("\xed\xa0\x80").name, "other");       // surrogate
  EXPECT_EQ(m.handler("caf\xc3\xa9").name, "caf\xc3\xa9");  // valid
  EXPECT_EQ(m.handler("\xf0\x9f\x98\x80").name, "\xf0\x9f\x98\x80");
}

TEST(metrics, HandlerBlocksHaveTheirOwnCacheLines) {
  static_assert(alignof(handler_metrics) >= 64);
  metrics m;
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(&m.handler("x")) % 64, 0u);
}

// ---- recorders touch exactly the documented counters -----------------------

handler_snapshot expected(std::initializer_list<std::pair<std::uint64_t handler_snapshot::*, std::uint64_t>> fields) {
  handler_snapshot s;
  s.name = "h";
  for (const auto& [field, v] : fields) s.*field = v;
  return s;
}

struct histogram_counts {
  std::uint64_t budget = 0, delay = 0, remaining = 0, run = 0;
  friend bool operator==(const histogram_counts&, const histogram_counts&) = default;
};

histogram_counts counts_of(const metrics_snapshot& s) {
  return {s.request_budget.count, s.queue_delay.count, s.remaining_budget_at_dispatch.count, s.run_duration.count};
}

void expect_globals_untouched(const metrics_snapshot& s) {
  EXPECT_EQ(s.retry_attempts, 0u);
  EXPECT_EQ(s.retries_denied_deadline, 0u);
  EXPECT_EQ(s.retries_denied_retry_budget, 0u);
  EXPECT_EQ(s.queue_depth, 0);
  EXPECT_EQ(s.workers_busy, 0);
}

using H = handler_snapshot;

TEST(metrics_recorders, OnAdmitted) {
  metrics m;
  m.on_admitted(m.handler("h"), 250ms);
  m.on_admitted(m.handler("h"), duration::max());  // no deadline: no budget sample
  const auto s = m.snapshot();
  EXPECT_EQ(*s.find("h"), expected({{&H::admitted, 2}}));
  EXPECT_EQ(counts_of(s), (histogram_counts{1, 0, 0, 0}));
  EXPECT_EQ(s.request_budget.sum_ns, 250'000'000u);
  expect_globals_untouched(s);
}

TEST(metrics_recorders, OnRejected) {
  metrics m;
  m.on_rejected(m.handler("h"), reject_reason::queue_full);
  m.on_rejected(m.handler("h"), reject_reason::shutting_down);
  m.on_rejected(m.handler("h"), reject_reason::shutting_down);
  m.on_rejected(m.handler("h"), reject_reason::none);
  const auto s = m.snapshot();
  EXPECT_EQ(*s.find("h"), expected({{&H::rejected_queue_full, 1}, {&H::rejected_shutting_down, 2}}));
  EXPECT_EQ(counts_of(s), histogram_counts{});
  expect_globals_untouched(s);
}

TEST(metrics_recorders, OnInsufficientBudgetAndInvalidTimeout) {
  metrics m;
  m.on_insufficient_budget(m.handler("h"));
  m.on_invalid_timeout(m.handler("h"));
  m.on_invalid_timeout(m.handler("h"));
  const auto s = m.snapshot();
  EXPECT_EQ(*s.find("h"), expected({{&H::rejected_insufficient_budget, 1}, {&H::rejected_invalid_timeout, 2}}));
  EXPECT_EQ(counts_of(s), histogram_counts{});
  expect_globals_untouched(s);
}

// Every refusal lands in rejected_total exactly once and never in finished_total.
TEST(metrics_recorders, OnRefusedCountsEachRefusalOnceInRejectedOnly) {
  struct refused_case {
    const char* what;
    status st;
    handler_snapshot want;
  };
  const refused_case cases[] = {
      {"queue_full", status::rejected(reject_reason::queue_full), expected({{&H::rejected_queue_full, 1}})},
      {"shutting_down", status::rejected(reject_reason::shutting_down), expected({{&H::rejected_shutting_down, 1}})},
      {"insufficient budget", status::expired(expiry_stage::admission),
       expected({{&H::rejected_insufficient_budget, 1}})},
      {"parent cancelled", status::cancelled(cancel_cause::parent), expected({{&H::rejected_cancelled, 1}})},
      {"invalid input", status::invalid(), expected({{&H::rejected_invalid_timeout, 1}})},
      {"not a refusal: ok", status::ok(), expected({})},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    metrics m;
    m.on_refused(m.handler("h"), c.st);
    const auto s = m.snapshot();
    EXPECT_EQ(*s.find("h"), c.want);
    EXPECT_EQ(counts_of(s), histogram_counts{});
  }
}

TEST(metrics_recorders, OnDispatch) {
  metrics m;
  m.on_dispatch(3ms, 40ms);
  m.on_dispatch(-1ns, duration::max());  // no deadline: no remaining sample
  const auto s = m.snapshot();
  EXPECT_TRUE(s.handlers.empty());
  EXPECT_EQ(counts_of(s), (histogram_counts{0, 2, 1, 0}));
  EXPECT_EQ(s.queue_delay.sum_ns, 3'000'000u);
  EXPECT_EQ(s.queue_delay.min_ns, 0u);
  EXPECT_EQ(s.remaining_budget_at_dispatch.sum_ns, 40'000'000u);
  expect_globals_untouched(s);
}

// A shard's records land in the same families as the registry's own.
TEST(metrics_shards, RecordIntoTheSameFamilies) {
  metrics m;
  metrics_shard* shard = m.acquire_shard();
  ASSERT_NE(shard, nullptr);
  handler_metrics& h = m.handler("h");
  m.on_dispatch(3ms, 40ms, shard);
  m.on_dispatch(1ms, duration::max());  // the registry's own histograms
  m.on_dispatch(-1ns, duration::max(), shard);
  m.on_finished(h, status::ok(), 2ms, false, shard);
  m.on_finished(h, status::cancelled(cancel_cause::requested), duration::zero(), false, shard);  // never ran
  m.on_finished(h, status::ok(), 5ms, true);
  const auto s = m.snapshot();
  EXPECT_EQ(counts_of(s), (histogram_counts{0, 3, 1, 2}));
  EXPECT_EQ(s.queue_delay.sum_ns, 4'000'000u);
  EXPECT_EQ(s.queue_delay.min_ns, 0u);
  EXPECT_EQ(s.queue_delay.max_ns, 3'000'000u);
  EXPECT_EQ(s.remaining_budget_at_dispatch.sum_ns, 40'000'000u);
  EXPECT_EQ(s.run_duration.sum_ns, 7'000'000u);
  EXPECT_EQ(s.find("h")->finished_ok, 2u);
  EXPECT_EQ(s.find("h")->finished_cancelled, 1u);
  EXPECT_EQ(s.find("h")->completed_late, 1u);
  m.release_shard(shard);
}

// A released shard stays counted and is handed to the next writer.
TEST(metrics_shards, AReleasedShardKeepsItsValuesAndIsReused) {
  metrics m;
  metrics_shard* a = m.acquire_shard();
  metrics_shard* b = m.acquire_shard();
  EXPECT_NE(a, b);
  m.on_dispatch(1ms, 9ms, a);
  m.on_dispatch(2ms, 8ms, b);
  m.release_shard(a);
  EXPECT_EQ(m.snapshot().queue_delay.count, 2u);
  EXPECT_EQ(m.acquire_shard(), a);
  m.on_dispatch(4ms, 6ms, a);
  const auto s = m.snapshot();
  EXPECT_EQ(s.queue_delay.count, 3u);
  EXPECT_EQ(s.queue_delay.sum_ns, 7'000'000u);
  EXPECT_EQ(s.remaining_budget_at_dispatch.sum_ns, 23'000'000u);
  m.release_shard(nullptr);  // nothing
  m.release_shard(a);
  m.release_shard(b);
}

// One shard per thread, with snapshots taken meanwhile: exact totals.
TEST(metrics_shards, ConcurrentWritersEachWithAShardCountExactly) {
  metrics m;
  constexpr int threads = 4, per_thread = 20'000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&m] {
      metrics_shard* shard = m.acquire_shard();
      handler_metrics& h = m.handler("h");
      for (int i = 0; i < per_thread; ++i) {
        m.on_dispatch(1ms, 9ms, shard);
        m.on_finished(h, status::ok(), 2ms, false, shard);
        if (i % 2'000 == 0) {
          EXPECT_LE(m.snapshot().run_duration.count, std::uint64_t{threads} * per_thread);
        }
      }
      m.release_shard(shard);
    });
  }
  for (auto& th : pool) th.join();
  const auto s = m.snapshot();
  EXPECT_EQ(s.queue_delay.count, std::uint64_t{threads} * per_thread);
  EXPECT_EQ(s.remaining_budget_at_dispatch.sum_ns, std::uint64_t{threads} * per_thread * 9'000'000);
  EXPECT_EQ(s.run_duration.count, std::uint64_t{threads} * per_thread);
  EXPECT_EQ(s.run_duration.sum_ns, std::uint64_t{threads} * per_thread * 2'000'000);
  EXPECT_EQ(s.find("h")->finished_ok, std::uint64_t{threads} * per_thread);
}

struct finished_case {
  const char* what;
  status st;
  duration run;
  bool late;
  handler_snapshot want;
  std::uint64_t run_samples;
};

TEST(metrics_recorders, OnFinishedTouchesExactlyTheDocumentedCounters) {
  const finished_case cases[] = {
      {"ok", status::ok(), 5ms, false, expected({{&H::finished_ok, 1}}), 1},
      {"ok late", status::ok(), 5ms, true,
       expected({{&H::finished_ok, 1}, {&H::completed_late, 1}, {&H::completed_late_ns, 5'000'000}}), 1},
      {"error", status::error(), 1ms, false, expected({{&H::finished_error, 1}}), 1},
      {"expired admission", status::expired(expiry_stage::admission), 0ns, false,
       expected({{&H::rejected_insufficient_budget, 1}}), 0},  // refused: never a finish
      {"expired queue", status::expired(expiry_stage::queue), 0ns, false,
       expected({{&H::expired_queue, 1}, {&H::finished_deadline_exceeded, 1}}), 0},
      {"expired run", status::expired(expiry_stage::run), 7ms, false,
       expected({{&H::expired_run, 1}, {&H::finished_deadline_exceeded, 1}}), 1},
      {"expired run late", status::expired(expiry_stage::run), 7ms, true,
       expected({{&H::expired_run, 1},
                 {&H::finished_deadline_exceeded, 1},
                 {&H::completed_late, 1},
                 {&H::completed_late_ns, 7'000'000}}),
       1},
      {"expired downstream", status::expired(expiry_stage::downstream), 2ms, false,
       expected({{&H::finished_deadline_exceeded, 1}}), 1},
      {"cancelled in queue", status::cancelled(cancel_cause::requested), 0ns, false,
       expected({{&H::finished_cancelled, 1}}), 0},
      {"cancelled running", status::cancelled(cancel_cause::caller_gone), 3ms, false,
       expected({{&H::finished_cancelled, 1}}), 1},
      {"rejected queue_full", status::rejected(reject_reason::queue_full), 0ns, false,
       expected({{&H::rejected_queue_full, 1}}), 0},
      {"rejected shutting_down", status::rejected(reject_reason::shutting_down), 0ns, false,
       expected({{&H::rejected_shutting_down, 1}}), 0},
      {"rejected broker_unavailable", status::rejected(reject_reason::broker_unavailable), 0ns, false,
       expected({{&H::rejected_broker_unavailable, 1}}), 0},
      {"expired reclaim", status::expired(expiry_stage::reclaim), 0ns, false,
       expected({{&H::expired_reclaim, 1}, {&H::finished_deadline_exceeded, 1}}), 0},
      {"expired idle", status::expired(expiry_stage::idle), 4ms, false,
       expected({{&H::expired_idle, 1}, {&H::finished_deadline_exceeded, 1}}), 1},
      {"expired retry", status::expired(expiry_stage::retry), 5ms, false,
       expected({{&H::expired_retry, 1}, {&H::finished_deadline_exceeded, 1}}), 1},
      // A job that ran and whose call an open circuit breaker refused: a finish, not a refusal.
      {"rejected circuit_open", status::rejected(reject_reason::circuit_open), 2ms, false,
       expected({{&H::finished_rejected, 1}}), 1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    metrics m;
    m.on_finished(m.handler("h"), c.st, c.run, c.late);
    const auto s = m.snapshot();
    ASSERT_EQ(s.handlers.size(), 1u);
    EXPECT_EQ(s.handlers[0], c.want);
    EXPECT_EQ(counts_of(s), (histogram_counts{0, 0, 0, c.run_samples}));
    if (c.run_samples != 0) {
      EXPECT_EQ(s.run_duration.sum_ns, static_cast<std::uint64_t>(c.run.count()));
    }
    expect_globals_untouched(s);
  }
}

TEST(metrics_recorders, OnRecordedCountsAsOnFinishedWithoutAHistogram) {
  // Fleet mode: the executor that ran the job timed it already.
  for (const status st : {status::ok(), status::error(), status::expired(expiry_stage::run),
                          status::expired(expiry_stage::reclaim), status::cancelled(cancel_cause::requested)}) {
    SCOPED_TRACE(describe(st));
    metrics finished;
    finished.on_finished(finished.handler("h"), st, duration::zero(), false);
    metrics recorded;
    recorded.on_recorded(recorded.handler("h"), st);
    const auto s = recorded.snapshot();
    EXPECT_EQ(s.handlers, finished.snapshot().handlers);
    EXPECT_EQ(counts_of(s), histogram_counts{});
  }
}

TEST(metrics_recorders, Retries) {
  metrics m;
  m.on_retry_attempt();
  m.on_retry_attempt();
  m.on_retry_denied_deadline();
  m.on_retry_denied_budget();
  m.on_retry_denied_budget();
  m.on_retry_denied_budget();
  const auto s = m.snapshot();
  EXPECT_EQ(s.retry_attempts, 2u);
  EXPECT_EQ(s.retries_denied_deadline, 1u);
  EXPECT_EQ(s.retries_denied_retry_budget, 3u);
  EXPECT_TRUE(s.handlers.empty());
  EXPECT_EQ(counts_of(s), histogram_counts{});
}

TEST(metrics, Gauges) {
  metrics m;
  m.queue_depth.add(5);
  m.queue_depth.sub(2);
  m.workers_busy.set(7);
  m.workers_busy.sub();
  const auto s = m.snapshot();
  EXPECT_EQ(s.queue_depth, 3);
  EXPECT_EQ(s.workers_busy, 6);
}

// ---- rendering -----------------------------------------------------------

TEST(render_prometheus, EmptyRegistryIsWellFormed) {
  metrics m;
  const auto e = parse_exposition(render_prometheus(m.snapshot()));
  EXPECT_EQ(e.families.size(), 16u);
  EXPECT_EQ(e.value("hourglass_retry_attempts_total"), 0.0);
  EXPECT_EQ(e.value("hourglass_queue_delay_seconds_bucket", {{"le", "+Inf"}}), 0.0);
  EXPECT_EQ(e.value("hourglass_queue_delay_seconds_sum"), 0.0);
  EXPECT_EQ(e.family("hourglass_jobs_admitted_total")->samples.size(), 0u);
}

TEST(render_prometheus, JobRetriesByResult) {
  metrics m;
  handler_metrics& h = m.handler("flaky");
  m.on_job_retry(h, job_retry_verdict::scheduled);
  m.on_job_retry(h, job_retry_verdict::scheduled);
  m.on_job_retry(h, job_retry_verdict::no_budget);
  m.on_job_retry(h, job_retry_verdict::not_retryable);  // not a retry: counted nowhere
  const auto e = parse_exposition(render_prometheus(m.snapshot()));
  EXPECT_EQ(e.value("hourglass_job_retries_total", {{"handler", "flaky"}, {"result", "scheduled"}}), 2.0);
  EXPECT_EQ(e.value("hourglass_job_retries_total", {{"handler", "flaky"}, {"result", "exhausted"}}), 0.0);
  EXPECT_EQ(e.value("hourglass_job_retries_total", {{"handler", "flaky"}, {"result", "no_budget"}}), 1.0);
  EXPECT_EQ(e.family("hourglass_job_retries_total")->samples.size(), 3u);
}

TEST(render_prometheus, EveryKnownLabelValueOfAnExistingHandlerIsEmitted) {
  metrics m;
  m.handler("idle");
  const auto e = parse_exposition(render_prometheus(m.snapshot()));
  const std::map<std::string, std::vector<std::string>> families = {
      {"hourglass_jobs_rejected_total",
       {"queue_full", "insufficient_budget", "invalid_timeout", "shutting_down", "broker_unavailable", "queue_paused",
        "cancelled"}},
      {"hourglass_jobs_expired_total", {"queue", "run", "idle", "reclaim", "retry", "human_wait"}},
      {"hourglass_jobs_finished_total", {"ok", "error", "rejected", "deadline_exceeded", "cancelled"}},
      {"hourglass_job_retries_total", {"scheduled", "exhausted", "no_budget"}},
  };
  const std::map<std::string, std::string> label_of = {{"hourglass_jobs_rejected_total", "reason"},
                                                       {"hourglass_jobs_expired_total", "stage"},
                                                       {"hourglass_job_retries_total", "result"},
                                                       {"hourglass_jobs_finished_total", "outcome"}};
  for (const auto& [family, values] : families) {
    EXPECT_EQ(e.family(family)->samples.size(), values.size()) << family;
    for (const auto& v : values) {
      EXPECT_EQ(e.value(family, {{"handler", "idle"}, {label_of.at(family), v}}), 0.0) << family << " " << v;
    }
  }
  EXPECT_EQ(e.value("hourglass_jobs_admitted_total", {{"handler", "idle"}}), 0.0);
  EXPECT_EQ(e.value("hourglass_jobs_completed_late_total", {{"handler", "idle"}}), 0.0);
  EXPECT_EQ(e.value("hourglass_jobs_completed_late_seconds_total", {{"handler", "idle"}}), 0.0);
  EXPECT_EQ(e.value("hourglass_retries_denied_total", {{"reason", "deadline"}}), 0.0);
  EXPECT_EQ(e.value("hourglass_retries_denied_total", {{"reason", "retry_budget"}}), 0.0);
}

TEST(render_prometheus, CountersAndGaugesCarryTheirValues) {
  metrics m;
  auto& h = m.handler("resize");
  m.on_admitted(h, 1s);
  m.on_rejected(h, reject_reason::queue_full);
  m.on_finished(h, status::expired(expiry_stage::queue), 0ns, false);
  m.on_finished(h, status::ok(), 1500ms, true);
  m.on_retry_denied_budget();
  m.queue_depth.set(-2);
  m.workers_busy.set(4);
  const std::string text = render_prometheus(m.snapshot());
  const auto e = parse_exposition(text);
  EXPECT_EQ(e.value("hourglass_jobs_admitted_total", {{"handler", "resize"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_jobs_rejected_total", {{"handler", "resize"}, {"reason", "queue_full"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_jobs_expired_total", {{"handler", "resize"}, {"stage", "queue"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_jobs_finished_total", {{"handler", "resize"}, {"outcome", "deadline_exceeded"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_jobs_finished_total", {{"handler", "resize"}, {"outcome", "ok"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_jobs_completed_late_total", {{"handler", "resize"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_jobs_completed_late_seconds_total", {{"handler", "resize"}}), 1.5);
  EXPECT_EQ(e.value("hourglass_retries_denied_total", {{"reason", "retry_budget"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_queue_depth"), -2.0);
  EXPECT_EQ(e.value("hourglass_workers_busy"), 4.0);
  EXPECT_NE(text.find("\nhourglass_jobs_completed_late_seconds_total{handler=\"resize\"} 1.5\n"), std::string::npos);
  EXPECT_EQ(e.family("hourglass_queue_depth")->type, "gauge");
  EXPECT_EQ(e.family("hourglass_run_duration_seconds")->type, "histogram");
  EXPECT_EQ(e.family("hourglass_jobs_finished_total")->type, "counter");
}

TEST(render_prometheus, HistogramBucketsAreCumulativeInSeconds) {
  metrics m;
  m.on_dispatch(50us, 900us);
  m.on_dispatch(3ms, 900us);
  m.on_dispatch(20s, 900us);
  m.on_dispatch(100s, 1ms);  // exactly on a bound: its log bucket straddles 1 ms
  const std::string text = render_prometheus(m.snapshot());
  const auto e = parse_exposition(text);
  const auto bucket = [&](const char* le) { return e.value("hourglass_queue_delay_seconds_bucket", {{"le", le}}); };
  EXPECT_EQ(bucket("0.0001"), 1.0);
  EXPECT_EQ(bucket("0.0025"), 1.0);
  EXPECT_EQ(bucket("0.005"), 2.0);
  EXPECT_EQ(bucket("10"), 2.0);
  EXPECT_EQ(bucket("30"), 3.0);
  EXPECT_EQ(bucket("60"), 3.0);
  EXPECT_EQ(bucket("+Inf"), 4.0);
  EXPECT_EQ(e.value("hourglass_queue_delay_seconds_count"), 4.0);
  EXPECT_NE(text.find("\nhourglass_queue_delay_seconds_sum 120.00305\n"), std::string::npos);
  EXPECT_EQ(e.family("hourglass_queue_delay_seconds")->samples.size(), prometheus_bucket_bounds_ns.size() + 3);
  EXPECT_EQ(e.value("hourglass_remaining_budget_at_dispatch_seconds_bucket", {{"le", "0.001"}}), 3.0);
  EXPECT_EQ(e.value("hourglass_remaining_budget_at_dispatch_seconds_bucket", {{"le", "0.0025"}}), 4.0);
}

TEST(render_prometheus, TimeToFirstOutputIsAHistogramOfItsOwn) {
  metrics m;
  m.on_first_output(3ms);
  m.on_first_output(200ms);
  const std::string text = render_prometheus(m.snapshot());
  const auto e = parse_exposition(text);
  EXPECT_EQ(e.family("hourglass_time_to_first_output_seconds")->type, "histogram");
  EXPECT_EQ(e.value("hourglass_time_to_first_output_seconds_bucket", {{"le", "0.005"}}), 1.0);
  EXPECT_EQ(e.value("hourglass_time_to_first_output_seconds_bucket", {{"le", "0.25"}}), 2.0);
  EXPECT_EQ(e.value("hourglass_time_to_first_output_seconds_count"), 2.0);
  EXPECT_NE(text.find("\nhourglass_time_to_first_output_seconds_sum 0.203\n"), std::string::npos) << text;
  EXPECT_EQ(m.snapshot().run_duration.count, 0u) << "its own family, nothing else";
}

TEST(render_prometheus, HistogramBucketsNeverCountValuesAboveLe) {
  metrics m;
  // Just above and exactly at bounds: "above" must never count toward le.
  for (const std::uint64_t bound : prometheus_bucket_bounds_ns) {
    m.queue_delay.record_ns(bound + 1);
    m.queue_delay.record_ns(bound);
  }
  const auto s = m.snapshot();
  const auto e = parse_exposition(render_prometheus(s));
  const auto& samples = e.family("hourglass_queue_delay_seconds")->samples;
  for (std::size_t i = 0; i < prometheus_bucket_bounds_ns.size(); ++i) {
    EXPECT_LE(samples[i].value, 2.0 * static_cast<double>(i) + 1.0) << i;  // at most the values <= le
    EXPECT_GE(samples[i].value, 2.0 * static_cast<double>(i)) << i;        // at least those of lower bounds
  }
}

TEST(render_prometheus, LabelValuesAreEscaped) {
  metrics m;
  const std::string nasty = "we\"ird\\na\nme";
  m.on_admitted(m.handler(nasty), 1ms);
  const std::string text = render_prometheus(m.snapshot());
  EXPECT_NE(text.find("hourglass_jobs_admitted_total{handler=\"we\\\"ird\\\\na\\nme\"} 1\n"), std::string::npos)
      << text.substr(0, 400);
  const auto e = parse_exposition(text);
  EXPECT_EQ(e.value("hourglass_jobs_admitted_total", {{"handler", nasty}}), 1.0);
  EXPECT_EQ(escape_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(escape_label_value("plain"), "plain");
}

TEST(render_prometheus, HandlersAreRenderedInNameOrder) {
  metrics m;
  m.handler("zeta");
  m.handler("alpha");
  m.handler("mid");
  const auto e = parse_exposition(render_prometheus(m.snapshot()));
  const auto& samples = e.family("hourglass_jobs_admitted_total")->samples;
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].labels.at("handler"), "alpha");
  EXPECT_EQ(samples[1].labels.at("handler"), "mid");
  EXPECT_EQ(samples[2].labels.at("handler"), "zeta");
}

// ---- concurrency ---------------------------------------------------------

TEST(metrics, ConcurrentRecordersAndCreationCountExactly) {
  metrics m(metrics_options{.max_handlers = 8});
  constexpr int threads = 4;
  constexpr int per_thread = 5'000;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&m, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto& h = m.handler("h" + std::to_string((i + t) % 12));  // 12 names, 8 slots
        m.on_admitted(h, 10ms);
        m.on_dispatch(1ms, 9ms);
        m.on_finished(h, status::ok(), 2ms, i % 10 == 0);
        m.queue_depth.add();
        m.queue_depth.sub();
        if (i % 100 == 0) (void)render_prometheus(m.snapshot());
      }
    });
  }
  for (auto& th : pool) th.join();
  const auto s = m.snapshot();
  EXPECT_EQ(s.handlers.size(), 9u);  // 8 named + other
  std::uint64_t admitted = 0, ok = 0, late = 0;
  for (const auto& h : s.handlers) {
    admitted += h.admitted;
    ok += h.finished_ok;
    late += h.completed_late;
  }
  EXPECT_EQ(admitted, std::uint64_t{threads} * per_thread);
  EXPECT_EQ(ok, std::uint64_t{threads} * per_thread);
  EXPECT_EQ(late, std::uint64_t{threads} * per_thread / 10);
  EXPECT_EQ(s.run_duration.count, std::uint64_t{threads} * per_thread);
  EXPECT_EQ(s.run_duration.sum_ns, std::uint64_t{threads} * per_thread * 2'000'000);
  EXPECT_EQ(s.queue_depth, 0);
  parse_exposition(render_prometheus(s));
}

}  // namespace
}  // namespace hourglass

namespace hourglass {
namespace {

// retry_call writes straight into the registry's retry counters.
TEST(metrics, RetryCallCountsIntoTheRegistry) {
  using namespace std::chrono_literals;
  manual_clock clk;
  metrics m;
  context_source ctx = context_source::with_timeout(clk, 1s);
  retry_policy policy;
  policy.max_attempts = 3;
  policy.initial_backoff = 0ms;
  policy.jitter = 0;
  int calls = 0;
  const status st = retry_call(
      ctx.get(), policy,
      [&](const context&) {
        calls++;
        return status::error();
      },
      nullptr, &m.retries);
  EXPECT_EQ(st, status::error());
  EXPECT_EQ(calls, 3);
  const auto s = m.snapshot();
  EXPECT_EQ(s.retry_attempts, 2u);
  EXPECT_NE(render_prometheus(s).find("hourglass_retry_attempts_total 2"), std::string::npos);
}

}  // namespace
}  // namespace hourglass
