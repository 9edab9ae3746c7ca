#include "terms/terms.hpp"

#include <algorithm>

namespace hourglass::server::detail {

namespace {

std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
}

bool is_job_id(std::string_view s) noexcept {
  return s.size() == 32 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::optional<bool> read_jitter_parameter(std::string_view text) noexcept {
  text = trim_ows(text);
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || !iequals(trim_ows(text.substr(0, eq)), "jitter")) return std::nullopt;
  const std::string_view value = trim_ows(text.substr(eq + 1));
  if (iequals(value, "full")) return true;
  if (iequals(value, "none")) return false;
  return std::nullopt;
}

}  // namespace hourglass::server::detail
