#include "schedules/schedule_config.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "hourglass/budget_codec.hpp"
#include "terms/terms.hpp"

namespace hourglass::server::detail {

schedule_options schedule_from_flag(const std::string& text) {
  schedule_options o;
  std::string parts[4];
  std::size_t n = 0, at = 0;
  for (; n < 4 && at <= text.size(); ++n) {
    // The body, last, may hold '|' itself.
    const std::size_t bar = n == 3 ? std::string::npos : text.find('|', at);
    parts[n] = text.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
    if (bar == std::string::npos) {
      ++n;
      break;
    }
    at = bar + 1;
  }
  if (n < 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    throw std::invalid_argument("--schedule must be NAME|CRON|HANDLER[|BODY], got '" + text + "'");
  }
  o.name = parts[0];
  o.cron = parts[1];
  o.handler = parts[2];
  o.body = parts[3];
  return o;
}

schedule_options schedule_from_toml(const toml::table& t) {
  schedule_options o;
  const auto* name = t["name"].as_string();
  const std::string which = "[[schedule]] " + (name != nullptr ? "'" + name->get() + "'" : std::string("(no name)"));
  const auto text = [&](std::string_view key, std::string& field, bool required) {
    const toml::node_view<const toml::node> v = t[key];
    if (!v) {
      if (required) throw std::invalid_argument(which + ": needs " + std::string(key));
      return;
    }
    const auto* s = v.as_string();
    if (s == nullptr) throw std::invalid_argument(which + ": " + std::string(key) + " must be a string");
    field = s->get();
  };
  for (const auto& [key, value] : t) {
    static constexpr std::string_view known[] = {"name", "cron",         "zone",      "handler",
                                                 "body", "content_type", "freshness", "overlap"};
    bool ok = false;
    for (const std::string_view k : known) ok = ok || key.str() == k;
    if (!ok) throw std::invalid_argument(which + ": unknown key '" + std::string(key.str()) + "'");
  }
  text("name", o.name, true);
  text("cron", o.cron, true);
  text("handler", o.handler, true);
  text("zone", o.zone, false);
  text("body", o.body, false);
  text("content_type", o.content_type, false);
  std::string freshness, overlap = "skip";
  text("freshness", freshness, false);
  text("overlap", overlap, false);
  if (!freshness.empty()) {
    const duration_parse d = parse_human_duration(freshness);
    if (!d.value) throw std::invalid_argument(which + ": freshness: " + d.error);
    o.freshness = *d.value;
  }
  if (overlap != "skip" && overlap != "allow") {
    throw std::invalid_argument(which + ": overlap must be \"skip\" or \"allow\", not '" + overlap + "'");
  }
  o.allow_overlap = overlap == "allow";
  return o;
}

job_retry_policy retry_from_text(const std::string& handler, const std::string& text) {
  const std::string which = "retry policy of '" + handler + "': ";
  job_retry_policy p;
  const std::size_t semicolon = text.find(';');
  if (semicolon != std::string::npos) {
    const std::optional<bool> jitter = read_jitter_parameter(std::string_view(text).substr(semicolon + 1));
    if (!jitter) throw std::invalid_argument(which + "its parameter must be jitter=full or jitter=none");
    p.jitter = *jitter;
  }
  const std::string policy = text.substr(0, semicolon);
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t comma = policy.find(',', at);
    std::string part = policy.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    const auto first = part.find_first_not_of(" \t");
    part = first == std::string::npos ? "" : part.substr(first, part.find_last_not_of(" \t") - first + 1);
    parts.push_back(part);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (parts.size() > 3)
    throw std::invalid_argument(which + "must be ATTEMPTS[,BASE[,CAP]][;jitter=none], got '" + text + "'");
  try {
    std::size_t end = 0;
    p.max_attempts = std::stoi(parts[0], &end);
    if (end != parts[0].size()) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw std::invalid_argument(which + "ATTEMPTS must be a whole number, got '" + parts[0] + "'");
  }
  const auto dur = [&](std::size_t i, duration& field) {
    const duration_parse d = parse_human_duration(parts[i]);
    if (!d.value) throw std::invalid_argument(which + d.error);
    field = *d.value;
  };
  if (parts.size() > 1) dur(1, p.base);
  if (parts.size() > 2) {
    dur(2, p.cap);
  } else {
    p.cap = std::max(p.cap, p.base);
  }
  try {
    validate(p);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(which + e.what());
  }
  return p;
}

}  // namespace hourglass::server::detail
