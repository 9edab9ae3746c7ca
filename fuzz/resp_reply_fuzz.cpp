// Redis replies (RESP) as the broker's socket delivers them, through the
// fleet client's parser (hiredis's redisReader) and the stream readers.
// Properties: bad bytes are a redis_unavailable, never a crash; the replies
// do not depend on how the bytes were split across reads.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "resp.hpp"
#include "stream_reply.hpp"

namespace {

using hourglass::fleet::redis_reply;

bool same(const redis_reply& a, const redis_reply& b) {
  if (a.kind != b.kind || a.str != b.str || a.integer != b.integer || a.elements.size() != b.elements.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.elements.size(); ++i) {
    if (!same(a.elements[i], b.elements[i])) return false;
  }
  return true;
}

// Every reply the bytes hold, fed `step` bytes at a time; nullopt when the
// parser refused them.
std::optional<std::vector<redis_reply>> parse(std::string_view bytes, std::size_t step) {
  hourglass::fleet::detail::reply_reader reader(1 << 20);
  std::vector<redis_reply> out;
  try {
    for (std::size_t at = 0; at < bytes.size(); at += step) {
      reader.feed(bytes.data() + at, std::min(step, bytes.size() - at));
      while (auto r = reader.next()) out.push_back(std::move(*r));
    }
  } catch (const hourglass::fleet::redis_unavailable&) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto whole = parse(bytes, bytes.size() + 1);
  const auto trickled = parse(bytes, 1 + size % 7);
  if (whole && trickled) {
    // A split may only delay a refusal past the end; what was parsed agrees.
    const std::size_t n = std::min(whole->size(), trickled->size());
    FUZZ_CHECK(whole->size() == trickled->size());
    for (std::size_t i = 0; i < n; ++i) FUZZ_CHECK(same((*whole)[i], (*trickled)[i]));
  }
  if (!whole) return 0;
  for (const redis_reply& r : *whole) {
    try {
      (void)hourglass::fleet::read_entries(r);
    } catch (const hourglass::fleet::redis_unavailable&) {
    }
    try {
      (void)hourglass::fleet::read_auto_claim(r);
    } catch (const hourglass::fleet::redis_unavailable&) {
    }
  }
  return 0;
}
