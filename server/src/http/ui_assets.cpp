#include "http/ui_assets.hpp"

#include <algorithm>

namespace hourglass::server::detail {

const ui_asset* find_ui_asset(std::string_view name) noexcept {
  if (name.empty()) name = "index.html";
  const auto all = ui_assets();
  const auto it = std::find_if(all.begin(), all.end(), [&](const ui_asset& a) { return a.name == name; });
  return it == all.end() ? nullptr : &*it;
}

response ui_response(std::string_view name, std::string_view if_none_match) {
  namespace http = boost::beast::http;
  const ui_asset* a = find_ui_asset(name);
  response res = a == nullptr               ? error_response(404, "not_found", "no such file of the dashboard")
                 : if_none_match == a->etag ? make_response(304, "", a->content_type)
                                            : make_response(200, std::string(a->body), a->content_type);
  if (a != nullptr) {
    res.set(http::field::etag, a->etag);
    res.set(http::field::cache_control, "no-cache");  // revalidate: a new binary serves new files at once
  }
  res.set("Content-Security-Policy", ui_content_security_policy);
  res.set("X-Content-Type-Options", "nosniff");
  res.set("X-Frame-Options", "DENY");
  res.set("Referrer-Policy", "no-referrer");
  return res;
}

}  // namespace hourglass::server::detail
