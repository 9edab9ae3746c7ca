#include "hourglass/server/builtin_handlers.hpp"

#include <boost/json.hpp>

#include <stdexcept>

#include "hourglass/support/json.hpp"

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

handler_fn call_handler(upstream_client& client) {
  return [&client](const context& ctx, const request_view& req) {
    constexpr const char* shape = R"({"upstream": NAME, "handler": H, "body": ...})";
    const auto o = input_object(req.body, shape);
    const auto* up = o.if_contains("upstream");
    const auto* h = o.if_contains("handler");
    if (up == nullptr || !up->is_string() || h == nullptr || !h->is_string()) {
      throw handler_error::bad_input(std::string("body must be ") + shape);
    }
    const std::string upstream(up->get_string());
    const std::string handler(h->get_string());
    if (!client.has(upstream))
      throw handler_error::bad_input("unknown upstream (only configured upstreams can be called)");
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
      res = client.post_job(ctx, upstream, handler, std::move(body), type, req.traceparent);
    } catch (const std::runtime_error& e) {  // I/O failure; stopped_error passes through
      throw handler_error(500, "upstream_unreachable", "upstream '" + upstream + "' failed: " + e.what());
    }
    if (res.status == 504) throw stopped_error(status::expired(expiry_stage::downstream));
    if (res.status >= 200 && res.status <= 299) {
      handler_result r;
      r.body = std::move(res.body);
      if (!res.content_type.empty()) r.content_type = std::move(res.content_type);
      return r;
    }
    if (res.status == 404)
      throw handler_error::bad_input("upstream '" + upstream + "' has no handler '" + handler + "'");
    throw handler_error(500, "downstream_error", "upstream '" + upstream + "' answered " + std::to_string(res.status));
  };
}

}  // namespace hourglass::server
