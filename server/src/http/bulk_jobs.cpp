#include "http/bulk_jobs.hpp"

#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>

#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {

namespace json = boost::json;

namespace {

// The longest freshness a job may ask: a day, as --max-budget allows at most.
constexpr std::int64_t max_freshness_ms = 24LL * 3600 * 1000;

bulk_item refused_item(std::string message) {
  bulk_item it;
  it.error = "invalid_job";
  it.message = std::move(message);
  return it;
}

std::optional<std::string> string_field(const json::object& o, std::string_view key, bool& bad) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    bad = true;
    return std::nullopt;
  }
  return std::string(v->get_string());
}

bulk_item read_item(const json::value& v) {
  if (!v.is_object()) return refused_item("a job must be an object");
  const json::object& o = v.get_object();
  for (const auto& member : o) {
    const std::string_view k = member.key();
    if (k != "handler" && k != "payload" && k != "content_type" && k != "idempotency_key" && k != "freshness_ms") {
      return refused_item("unknown field \"" + std::string(k) + "\"");
    }
  }
  bulk_item it;
  bool bad = false;
  const std::optional<std::string> handler = string_field(o, "handler", bad);
  if (!handler || handler->empty()) return refused_item("\"handler\" must be a non-empty string");
  it.handler = *handler;
  if (const json::value* p = o.if_contains("payload")) {
    if (p->is_string()) {
      it.payload = std::string(p->get_string());
    } else {
      it.payload = support::serialize_json(*p);
      it.content_type = "application/json";
    }
  }
  if (const auto type = string_field(o, "content_type", bad)) it.content_type = *type;
  if (bad) return refused_item("\"content_type\" must be a string");
  it.idempotency_key = string_field(o, "idempotency_key", bad);
  if (bad) return refused_item("\"idempotency_key\" must be a string");
  if (o.contains("freshness_ms")) {
    const auto ms = support::int_member(o, "freshness_ms", 0, max_freshness_ms);
    if (!ms) return refused_item("\"freshness_ms\" must be an integer from 0 to 86400000");
    it.freshness = std::chrono::milliseconds(*ms);
  }
  return it;
}

}  // namespace

bulk_reading read_bulk_body(std::string_view body) {
  bulk_reading r;
  const std::optional<json::value> doc = support::parse_json(body);
  if (!doc) {
    r.message = "the body is not JSON";
    return r;
  }
  const json::object* o = doc->if_object();
  const json::value* jobs = o != nullptr ? o->if_contains("jobs") : nullptr;
  if (jobs == nullptr || !jobs->is_array()) {
    r.message = "the body must be {\"jobs\": [...]}";
    return r;
  }
  const json::array& list = jobs->get_array();
  if (list.empty()) {
    r.message = "\"jobs\" is empty";
    return r;
  }
  if (list.size() > max_bulk_jobs) {
    r.message = "more than " + std::to_string(max_bulk_jobs) + " jobs in one request";
    return r;
  }
  r.items.reserve(list.size());
  for (const json::value& v : list) r.items.push_back(read_item(v));
  r.ok = true;
  return r;
}

std::string bulk_response_body(const std::vector<bulk_answer>& answers) {
  bool errors = false;
  for (const bulk_answer& a : answers) errors = errors || a.status != 202;
  support::json_writer w;
  w.begin_object().member("errors", errors).key("jobs").begin_array();
  for (const bulk_answer& a : answers) {
    std::string_view body = a.body;
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) body.remove_suffix(1);
    w.begin_object().member("status", a.status).key("body").raw(body.empty() ? std::string_view("{}") : body);
    w.end_object();
  }
  w.end_array().end_object();
  std::string out = w.take();
  out.push_back('\n');
  return out;
}

}  // namespace hourglass::server::detail
