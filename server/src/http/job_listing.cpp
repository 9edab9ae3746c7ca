#include "http/job_listing.hpp"

#include <boost/url/params_view.hpp>
#include <boost/url/parse_query.hpp>

#include <array>
#include <charconv>

#include "core/job_view.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "hourglass/server/handler.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {

namespace {

// A cursor as a page returns it: short and plain (each store checks its form).
bool cursor_text(std::string_view s) noexcept {
  if (s.size() > 128) return false;
  for (const char c : s) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

std::variant<list_request, list_query_error> read_list_query(std::string_view target) {
  list_request q;
  q.limit = default_list_limit;
  const auto at = target.find('?');
  if (at == std::string_view::npos) return q;
  // A copy: Boost.URL 1.81's params_view reads the last value past the end
  // of a view that is not followed by a NUL (the request line's " HTTP/1.1").
  const std::string query(target.substr(at + 1));
  if (!boost::urls::parse_query(query)) return list_query_error{"the query string is malformed"};
  // decoded, '+' as a space (as forms send it)
  for (const boost::urls::param& p : boost::urls::params_view(query, boost::urls::encoding_opts(true))) {
    const std::string& value = p.value;
    if (p.key.empty()) continue;  // "?&limit=3", "a=1&&b=2": nothing there
    if (p.key == "state") {
      if (value.empty() || !jobs::parse_job_filter(value))
        return list_query_error{"state: not a job state, \"finished\" or \"retrying\""};
      q.state = value;
    } else if (p.key == "handler") {
      if (!valid_handler_name(value)) return list_query_error{"handler: 1 to 64 of [A-Za-z0-9._-]"};
      q.handler = value;
    } else if (p.key == "cursor") {
      if (!cursor_text(value)) return list_query_error{"cursor: not one a page returned"};
      q.cursor = value;
    } else if (p.key == "limit") {
      std::size_t n = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n < 1 || n > max_list_limit) {
        return list_query_error{"limit: an integer from 1 to 1000"};
      }
      q.limit = n;
    } else {
      return list_query_error{"unknown parameter " + p.key + " (state, handler, cursor and limit are known)"};
    }
  }
  return q;
}

purge_reading read_purge_query(std::string_view target, std::string_view unconfirmed) {
  purge_reading r;
  bool confirmed = false;
  const auto at = target.find('?');
  const std::string query(at == std::string_view::npos ? std::string_view() : target.substr(at + 1));
  if (!boost::urls::parse_query(query)) return {0, "the query string is malformed"};
  for (const boost::urls::param& p : boost::urls::params_view(query, boost::urls::encoding_opts(true))) {
    if (p.key.empty()) continue;
    if (p.key == "confirm") {
      confirmed = p.value == "yes";
    } else if (p.key == "limit") {
      std::size_t n = 0;
      const auto [end, ec] = std::from_chars(p.value.data(), p.value.data() + p.value.size(), n);
      if (ec != std::errc() || end != p.value.data() + p.value.size() || n < 1 || n > max_list_limit) {
        return {0, "limit: an integer from 1 to 1000"};
      }
      r.limit = n;
    } else {
      return {0, "unknown parameter " + p.key + " (limit and confirm are known)"};
    }
  }
  if (!confirmed) return {0, std::string(unconfirmed)};
  return r;
}

std::string job_page_json(const job_page& page) {
  support::json_writer w;
  w.begin_object().key("jobs").begin_array();
  for (const job_view& j : page.jobs) {
    std::string one = job_json(j, job_detail::listed);
    while (!one.empty() && one.back() == '\n') one.pop_back();
    w.raw(one);
  }
  w.end_array().key("next_cursor");
  if (page.next_cursor.empty()) {
    w.null();
  } else {
    w.value(page.next_cursor);
  }
  return w.end_object().take() + "\n";
}

}  // namespace hourglass::server::detail
