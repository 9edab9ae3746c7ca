#include "hourglass/ctl/render.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace hourglass::ctl {

namespace json = boost::json;

namespace {

// Rows of cells, each column as wide as its widest cell, two spaces between.
class text_table {
 public:
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  std::string str() const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_) {
      width.resize(std::max(width.size(), r.size()));
      for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    }
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();  // an empty last cell
      out += line + '\n';
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

const json::value* member(const json::object& o, std::string_view key) { return o.if_contains(key); }

// A member as text: strings escaped, numbers as the API wrote them, "-" when absent.
std::string text_of(const json::value* v) {
  if (v == nullptr || v->is_null()) return "-";
  if (v->is_string()) return terminal_safe(v->get_string());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  if (v->is_double()) return fmt::format("{:.3f}", v->get_double());
  return terminal_safe(json::serialize(*v));
}
std::string text_of(const json::object& o, std::string_view key) { return text_of(member(o, key)); }

double number_of(const json::value& v) {
  if (v.is_double()) return v.get_double();
  if (v.is_int64()) return static_cast<double>(v.get_int64());
  if (v.is_uint64()) return static_cast<double>(v.get_uint64());
  return std::nan("");
}

std::string job_detail(const json::object& j) {
  std::vector<std::string> bits;
  if (const auto* v = member(j, "stage")) bits.push_back("stage " + text_of(v));
  if (const auto* v = member(j, "cause")) bits.push_back(text_of(v));
  if (const auto* v = member(j, "reason")) bits.push_back(text_of(v));
  if (const auto* v = member(j, "due_in_ms")) bits.push_back("due in " + human_ms(v));
  if (const auto* v = member(j, "deliveries"); v != nullptr && number_of(*v) > 1)
    bits.push_back(text_of(v) + " deliveries");
  if (const auto* v = member(j, "consumer")) bits.push_back("on " + text_of(v));
  if (const auto* v = member(j, "error")) bits.push_back(text_of(v) + ": " + text_of(j, "message"));
  if (const auto* v = member(j, "attempt"))
    bits.push_back("attempt " + text_of(v) + ", " + text_of(j, "attempts_left") + " left");
  if (member(j, "cancel_requested") != nullptr) bits.emplace_back("cancel requested");
  std::string out;
  for (const auto& b : bits) out += (out.empty() ? "" : ", ") + b;
  return out;
}

}  // namespace

std::string terminal_safe(std::string_view s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0u;
    const auto third = i + 2 < s.size() ? static_cast<unsigned char>(s[i + 2]) : 0u;
    if ((u < 0x20 && !(keep_newlines && (u == '\n' || u == '\t'))) || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else if (u == 0xc2 && next >= 0x80 && next <= 0x9f) {  // C1 controls, U+0080-U+009F (CSI, OSC, ...)
      out += fmt::format("\\u{:04x}", next);
      ++i;
    } else if (u == 0xe2 && next == 0x80 && third >= 0xaa && third <= 0xae) {  // bidi overrides U+202A-U+202E
      out += fmt::format("\\u20{:02x}", third - 0x80);
      i += 2;
    } else if (u == 0xe2 && next == 0x81 && third >= 0xa6 && third <= 0xa9) {  // bidi isolates U+2066-U+2069
      out += fmt::format("\\u20{:02x}", third - 0x80 + 0x40);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string human_ms(const json::value* ms) {
  if (ms == nullptr || ms->is_null()) return "-";
  const double v = number_of(*ms);
  if (std::isnan(v)) return "-";
  const double a = std::abs(v);
  if (a >= 3'600'000) return fmt::format("{:.1f} h", v / 3'600'000);
  if (a >= 60'000) return fmt::format("{:.1f} min", v / 60'000);
  if (a >= 1'000) return fmt::format("{:.1f} s", v / 1'000);
  return fmt::format("{:.0f} ms", v);
}

std::string queues_text(const json::value& answer) {
  std::vector<const json::object*> queues;
  if (const auto* o = answer.if_object()) {
    if (const auto* list = o->if_contains("queues"); list != nullptr && list->is_array()) {
      for (const auto& q : list->get_array()) {
        if (q.is_object()) queues.push_back(&q.get_object());
      }
    } else {
      queues.push_back(o);
    }
  }
  text_table t;
  t.row({"QUEUE", "STORE", "STATE", "QUEUED", "RUNNING", "SCHEDULED", "WAITING", "DEAD", "OLDEST", "PREDICTED WAIT",
         "SLOTS"});
  for (const auto* q : queues) {
    const json::object empty;
    const auto* c = member(*q, "counts");
    const json::object& counts = c != nullptr && c->is_object() ? c->get_object() : empty;
    const auto* pw = member(*q, "predicted_wait_ms");
    const auto* paused = member(*q, "paused");
    t.row({text_of(*q, "name"), text_of(*q, "store"),
           paused != nullptr && paused->is_bool() && paused->get_bool() ? "paused" : "running",
           text_of(counts, "queued"), text_of(counts, "running"), text_of(counts, "scheduled"),
           text_of(counts, "waiting"), text_of(counts, "dead"), human_ms(member(*q, "oldest_queued_age_ms")),
           pw != nullptr && pw->is_null() ? "none serve it" : human_ms(pw), text_of(*q, "live_slots")});
  }
  std::string out = t.str();
  for (const auto* q : queues) {
    // The fleet's rates over recent minutes: ok, errors and expiries a second.
    const auto* recent = member(*q, "recent");
    if (recent == nullptr || !recent->is_array() || recent->get_array().empty()) continue;
    std::string line = "recent (" + text_of(*q, "name") + "):";
    for (const auto& r : recent->get_array()) {
      if (!r.is_object() || !r.get_object().contains("per_second")) continue;
      const auto& per = r.at("per_second");
      const auto sum = [&](std::string_view group) {
        double s = 0;
        if (const auto* g = per.is_object() ? per.get_object().if_contains(group) : nullptr; g && g->is_object()) {
          for (const auto& [k, v] : g->get_object()) {
            if (group == "expired" || k == "error") s += number_of(v);
          }
        }
        return s;
      };
      const auto* ok = per.is_object() && per.get_object().contains("finished") && per.at("finished").is_object()
                           ? per.at("finished").get_object().if_contains("ok")
                           : nullptr;
      line += fmt::format(" {:.0f} s: {:.1f} ok/s, {:.1f} errors/s, {:.1f} expired/s;", number_of(r.at("window_s")),
                          ok != nullptr ? number_of(*ok) : 0.0, sum("finished"), sum("expired"));
    }
    line.back() = '\n';
    out += '\n' + line;
  }
  for (const auto* q : queues) {
    const auto* consumers = member(*q, "consumers");
    if (consumers == nullptr || !consumers->is_array() || consumers->get_array().empty()) continue;
    text_table ct;
    ct.row({"CONSUMER (" + text_of(*q, "name") + ")", "SLOTS", "HELD", "LEASE LEFT"});
    for (const auto& cv : consumers->get_array()) {
      if (!cv.is_object()) continue;
      const auto& co = cv.get_object();
      const auto* lease = member(co, "lease_left_ms");
      const auto* draining = member(co, "draining");
      ct.row({text_of(co, "name"), text_of(co, "slots"), text_of(co, "held"),
              lease != nullptr && number_of(*lease) <= 0                           ? "expired"
              : draining != nullptr && draining->is_bool() && draining->get_bool() ? human_ms(lease) + " (draining)"
                                                                                   : human_ms(lease)});
    }
    out += '\n' + ct.str();
  }
  return out;
}

std::string jobs_text(const std::vector<json::object>& jobs) {
  text_table t;
  t.row({"ID", "HANDLER", "STATE", "DETAIL"});
  for (const auto& j : jobs) t.row({text_of(j, "id"), text_of(j, "handler"), text_of(j, "state"), job_detail(j)});
  return t.str();
}

std::string job_text(const json::object& job) {
  text_table t;
  for (const auto& [key, value] : job) {
    if (key == "attempts" || key == "result" || key == "result_base64" || key == "payload") continue;
    const bool ms = key.size() > 3 && std::string_view(key).substr(key.size() - 3) == "_ms";
    t.row({terminal_safe(key) + ":", ms ? human_ms(&value) : text_of(&value)});
  }
  std::string out = t.str();
  if (const auto* attempts = member(job, "attempts"); attempts != nullptr && attempts->is_array()) {
    text_table at;
    at.row({"ATTEMPT", "OUTCOME", "STAGE", "ERROR", "RUN"});
    // Only the last attempts are kept: number them from the first kept one.
    const auto* started = member(job, "attempt");
    const bool running = text_of(job, "state") == "running";
    const int kept = static_cast<int>(attempts->get_array().size());
    const int ended = started != nullptr ? static_cast<int>(number_of(*started)) - (running ? 1 : 0) : kept;
    int n = std::max(ended - kept, 0);
    for (const auto& a : attempts->get_array()) {
      if (!a.is_object()) continue;
      const auto& ao = a.get_object();
      at.row({std::to_string(++n), text_of(ao, "outcome"), text_of(ao, "stage"),
              member(ao, "error") != nullptr ? text_of(ao, "error") + ": " + text_of(ao, "message") : "-",
              human_ms(member(ao, "run_ms"))});
    }
    out += '\n' + at.str();
  }
  if (const auto* p = member(job, "payload"); p != nullptr && p->is_object()) {
    const auto& po = p->get_object();
    const auto* text = member(po, "text");
    const auto* base64 = member(po, "base64");
    const auto* truncated = member(po, "truncated");
    const bool cut = truncated != nullptr && truncated->is_bool() && truncated->get_bool();
    std::string shown = text != nullptr && text->is_string()       ? std::string(text->get_string())
                        : base64 != nullptr && base64->is_string() ? std::string(base64->get_string())
                                                                   : std::string();
    out += fmt::format("\npayload ({} bytes, {}{}{}):\n", text_of(po, "bytes"),
                       text_of(po, "content_type").empty() ? "no content type" : text_of(po, "content_type"),
                       base64 != nullptr ? ", base64" : "", cut ? ", the first of them" : "");
    out += terminal_safe(shown, text != nullptr);
    if (out.back() != '\n') out += '\n';
  }
  if (const auto* r = member(job, "result"); r != nullptr && r->is_string()) {
    out += "\nresult:\n" + terminal_safe(r->get_string(), true);
    if (out.back() != '\n') out += '\n';
  } else if (const auto* b = member(job, "result_base64"); b != nullptr && b->is_string()) {
    out += "\nresult (base64):\n" + terminal_safe(b->get_string()) + '\n';
  }
  return out;
}

std::string refusal_text(unsigned status, std::string_view body) {
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) {
    std::string text = terminal_safe(body.substr(0, std::min<std::size_t>(body.size(), 200)));
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return fmt::format("{}{}{}", status, text.empty() ? "" : " ", text);
  }
  const auto& o = v.get_object();
  std::string out = fmt::format("{} {}", status, text_of(o, "error"));
  if (member(o, "stage") != nullptr) out += " (stage " + text_of(o, "stage") + ")";
  if (member(o, "message") != nullptr) out += ": " + text_of(o, "message");
  return out;
}

}  // namespace hourglass::ctl
