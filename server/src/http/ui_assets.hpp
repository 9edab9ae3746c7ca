// The dashboard's files (server/ui/), built into the library by
// cmake/hourglassEmbed.cmake: the daemon serves them at /ui/ without reading
// any path at run time, so what runs is what was tested.
#pragma once

#include <span>
#include <string_view>

#include "http/responses.hpp"

namespace hourglass::server::detail {

struct ui_asset {
  std::string_view name;          // "index.html", "app.js", ...
  std::string_view content_type;  // from the name's extension
  std::string_view body;
  std::string_view etag;  // quoted SHA-1 of the body
};

// Every embedded file, sorted by name (generated).
std::span<const ui_asset> ui_assets() noexcept;

// The file for a path under /ui/: "" is index.html; nullptr when none.
const ui_asset* find_ui_asset(std::string_view name) noexcept;

// The headers every dashboard answer carries: scripts, styles and requests
// only from this origin, no framing, no sniffing, no referrer.
inline constexpr std::string_view ui_content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// GET /ui/{name}: the file with its type, etag and the headers above; 304
// when `if_none_match` names its etag; 404 for a name that is no file.
response ui_response(std::string_view name, std::string_view if_none_match);

}  // namespace hourglass::server::detail
