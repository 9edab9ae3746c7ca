#include "hourglass/server/builtin_handlers.hpp"

#include <boost/json.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "hourglass/server/http_server.hpp"
#include "hourglass/support/json.hpp"
#include "upstream/call_rules.hpp"

namespace hourglass::server {

namespace {

boost::json::object input_object(std::string_view body, const char* expected) {
  auto v = support::parse_json(body);
  if (!v || !v->is_object()) throw handler_error::bad_input(std::string("body must be ") + expected);
  return std::move(v->as_object());
}

}  // namespace

handler_fn echo_handler() {
  return [](const context&, const request_view& req) {
    handler_result r;
    r.body = std::string(req.body);
    if (!req.content_type.empty()) r.content_type = std::string(req.content_type);
    return r;
  };
}

handler_fn sleep_handler() {
  return [](const context& ctx, const request_view& req) {
    const auto o = input_object(req.body, R"({"ms": N}, 0 <= N <= 3600000)");
    const auto ms = support::int_member(o, "ms", 0, 3'600'000);
    if (!ms) throw handler_error::bad_input(R"(body must be {"ms": N}, 0 <= N <= 3600000)");
    // On the context's clock (the daemon's): a stop wakes it at once, and a
    // manual_clock in tests moves it.
    if (!ctx.sleep_for(std::chrono::milliseconds(*ms))) ctx.check();
    ctx.check();  // stopped at the very end: not a late completion
    handler_result r;
    r.body = support::json_object().add("slept_ms", static_cast<std::int64_t>(*ms)).str();
    r.content_type = "application/json";
    return r;
  };
}

handler_fn spin_handler() {
  return [](const context& ctx, const request_view& req) {
    const auto o = input_object(req.body, R"({"us": N}, 0 <= N <= 60000000)");
    const auto us = support::int_member(o, "us", 0, 60'000'000);
    if (!us) throw handler_error::bad_input(R"(body must be {"us": N}, 0 <= N <= 60000000)");
    const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(*us);
    volatile std::uint64_t sink = 0;
    std::uint64_t x = 88172645463325252ull;
    while (std::chrono::steady_clock::now() < end) {
      if (ctx.done()) ctx.check();
      for (int i = 0; i < 64; ++i) {  // well under a microsecond
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
      }
      sink = sink + x;
    }
    ctx.check();
    handler_result r;
    r.body = support::json_object().add("spun_us", static_cast<std::int64_t>(*us)).str();
    r.content_type = "application/json";
    return r;
  };
}

handler_fn approval_handler() {
  return [](const context& ctx, const request_view& req) {
    if (req.woke_by == "signal") {  // the person answered: the rest of the work, on the budget left
      ctx.check();
      handler_result r;
      r.body = support::json_object()
                   .add("signal", req.signal_name)
                   .add("payload", req.signal_payload)
                   .add("remaining_ms", to_millis(ctx.remaining()))
                   .str();
      r.content_type = "application/json";
      return r;
    }
    constexpr const char* shape =
        R"({"work_ms": N, "signal": NAME, "wait_ms": W}, 0 <= N <= 3600000, 1 <= W <= 604800000)";
    const auto o = input_object(req.body, shape);
    const auto work = support::int_member(o, "work_ms", 0, 3'600'000);
    const auto wait = support::int_member(o, "wait_ms", 1, 604'800'000);
    const auto* name = o.if_contains("signal");
    if (!work || !wait || name == nullptr || !name->is_string() || !valid_handler_name(name->get_string())) {
      throw handler_error::bad_input(std::string("body must be ") + shape);
    }
    if (!ctx.sleep_for(std::chrono::milliseconds(*work))) ctx.check();
    ctx.check();
    return handler_result::wait_for_signal(std::string(name->get_string()), std::chrono::milliseconds(*wait));
  };
}

handler_fn fanout_handler(http_server& srv) {
  return [&srv](const context& ctx, const request_view& req) {
    if (!req.woke_by.empty()) {  // its children's outcomes, as they were when the wait ended
      // Their results while they fit its own (--max-result, with room for the
      // rest): past that a child's result is left out and its size said, so
      // a fan-out of fan-outs cannot grow with each level.
      const std::size_t room = srv.options().max_result / 4 * 3;
      std::size_t used = 0;
      boost::json::array children;
      for (const child_outcome& c : req.children) {
        boost::json::object o{{"id", c.id}, {"state", c.state}};
        if (c.ok()) {
          const std::size_t size = boost::json::serialize(boost::json::value(c.result)).size();
          if (size <= room - std::min(room, used)) {
            used += size;
            o["result"] = c.result;
          } else {
            o["result_omitted_bytes"] = c.result.size();
          }
        }
        if (!c.detail.empty()) o["detail"] = c.detail;
        children.push_back(std::move(o));
      }
      handler_result r;
      r.body = boost::json::serialize(boost::json::object{{"woke_by", req.woke_by}, {"children", std::move(children)}});
      r.content_type = "application/json";
      return r;
    }
    constexpr const char* shape =
        R"({"handler": H, "bodies": [B, ...] (1 to 100), "until": "all" | "first_success" | N})";
    const auto o = input_object(req.body, shape);
    const auto* h = o.if_contains("handler");
    const auto* bodies = o.if_contains("bodies");
    if (h == nullptr || !h->is_string() || bodies == nullptr || !bodies->is_array() || bodies->as_array().empty() ||
        bodies->as_array().size() > 100) {
      throw handler_error::bad_input(std::string("body must be ") + shape);
    }
    fan_in until = fan_in::all();
    if (const auto* u = o.if_contains("until")) {
      if (u->is_string() && u->get_string() == "first_success") {
        until = fan_in::first_success();
      } else if (const auto n = u->is_int64() ? u->get_int64() : -1; n >= 1 && n <= 100) {
        until = fan_in::first(static_cast<std::size_t>(n));
      } else if (!(u->is_string() && u->get_string() == "all")) {
        throw handler_error::bad_input(std::string("body must be ") + shape);
      }
    }
    if (req.job_id.empty()) throw handler_error::bad_input("fanout waits for its children: send it async");
    for (const auto& b : bodies->as_array()) {
      child_job c;
      c.handler = std::string(h->get_string());
      if (b.is_string()) {
        c.body = std::string(b.get_string());
      } else {
        c.body = support::serialize_json(b);
        c.content_type = "application/json";
      }
      const child_answer a = srv.enqueue_child(ctx, req, c);
      if (a.verdict == child_answer::kind::refused && a.refusal.code == outcome::invalid) {
        throw handler_error::bad_input(a.message);  // an unknown handler
      }
    }
    return handler_result::wait_for(until);
  };
}

stream_handler_fn stream_handler() {
  return [](const context& ctx, const request_view& req, output_stream& out) {
    constexpr const char* shape =
        R"({"chunks": N, "interval_ms": M, "stall_after": K}, 0 <= N <= 1000000, 0 <= M <= 3600000, 0 <= K)";
    const auto o = input_object(req.body, shape);
    const auto chunks = support::int_member(o, "chunks", 0, 1'000'000);
    const auto interval = o.contains("interval_ms") ? support::int_member(o, "interval_ms", 0, 3'600'000)
                                                    : std::optional<std::int64_t>(0);
    const auto stall = o.contains("stall_after") ? support::int_member(o, "stall_after", 0, 1'000'000)
                                                 : std::optional<std::int64_t>(-1);
    if (!chunks || !interval || !stall) throw handler_error::bad_input(std::string("body must be ") + shape);
    for (std::int64_t i = 0;; ++i) {
      if (i == *stall) {  // no more output, no progress: only a stop ends this
        ctx.sleep_until(never);
        ctx.check();
      }
      if (i == *chunks) break;
      if (i > 0 && !ctx.sleep_for(std::chrono::milliseconds(*interval))) ctx.check();
      out.write("chunk " + std::to_string(i + 1) + " of " + std::to_string(*chunks) + "\n");
    }
    ctx.check();  // stopped at the very end: not a late completion
  };
}

handler_fn call_handler(upstream_client& client, executor* ex) {
  return [&client, ex](const context& ctx, const request_view& req) {
    constexpr const char* shape =
        R"({"upstream": NAME, "handler": H, "body": ...} or {"upstreams": [NAME, ...], "hedge_after_ms": N, ...})";
    const auto o = input_object(req.body, shape);
    const auto* up = o.if_contains("upstream");
    const auto* ups = o.if_contains("upstreams");
    const auto* h = o.if_contains("handler");
    if ((up == nullptr) == (ups == nullptr) || h == nullptr || !h->is_string()) {
      throw handler_error::bad_input(std::string("body must be ") + shape);
    }
    std::vector<std::string> upstreams;
    if (up != nullptr) {
      if (!up->is_string()) throw handler_error::bad_input(std::string("body must be ") + shape);
      upstreams.emplace_back(up->get_string());
    } else {
      if (!ups->is_array() || ups->as_array().empty() || ups->as_array().size() > 8) {
        throw handler_error::bad_input(R"("upstreams" must be an array of 1 to 8 names)");
      }
      for (const auto& n : ups->as_array()) {
        if (!n.is_string()) throw handler_error::bad_input(R"("upstreams" must be an array of 1 to 8 names)");
        upstreams.emplace_back(n.get_string());
      }
    }
    duration hedge_after = duration::max();
    if (o.contains("hedge_after_ms")) {
      const auto ms = support::int_member(o, "hedge_after_ms", 0, 3'600'000);
      if (!ms) throw handler_error::bad_input(R"("hedge_after_ms" must be an integer, 0 to 3600000)");
      hedge_after = std::chrono::milliseconds(*ms);
    }
    if (upstreams.size() > 1 && (hedge_after == duration::max() || ex == nullptr)) {
      throw handler_error::bad_input(ex == nullptr ? "this call handler cannot hedge: give one \"upstream\""
                                                   : R"(several "upstreams" need "hedge_after_ms")");
    }
    const std::string handler(h->get_string());
    for (const auto& name : upstreams) {
      if (!client.has(name))
        throw handler_error::bad_input("unknown upstream (only configured upstreams can be called)");
    }
    const std::string& upstream = upstreams.front();
    if (!valid_handler_name(handler)) throw handler_error::bad_input("invalid handler name");
    std::string body;
    std::string type = "application/octet-stream";
    if (const auto* b = o.if_contains("body")) {
      if (b->is_string()) {
        body = std::string(b->get_string());
      } else {
        body = support::serialize_json(*b);
        type = "application/json";
      }
    }
    upstream_response res;
    try {
      res = upstreams.size() == 1
                ? client.post_job(ctx, upstream, handler, std::move(body), type, req.traceparent)
                : client.post_job_hedged(*ex, ctx, upstreams, hedge_after, handler, body, type, req.traceparent);
    } catch (const std::runtime_error& e) {  // I/O failure; stopped_error passes through
      throw handler_error(500, "upstream_unreachable", "upstream '" + upstream + "' failed: " + e.what());
    }
    // A streamed answer cut off by its job's end counts as that ending.
    const unsigned answered = detail::effective_answer_of(res.status, {}, res.job_outcome).http_status;
    if (answered == 504) throw stopped_error(status::expired(expiry_stage::downstream));
    if (answered >= 200 && answered <= 299) {
      handler_result r;
      r.body = std::move(res.body);
      if (!res.content_type.empty()) r.content_type = std::move(res.content_type);
      return r;
    }
    if (res.status == 404)
      throw handler_error::bad_input("upstream '" + upstream + "' has no handler '" + handler + "'");
    if (answered != res.status) {
      throw handler_error(500, "downstream_error", "upstream '" + upstream + "' ended its stream " + res.job_outcome);
    }
    throw handler_error(500, "downstream_error", "upstream '" + upstream + "' answered " + std::to_string(res.status));
  };
}

}  // namespace hourglass::server
