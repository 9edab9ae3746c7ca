#include "stream_reply.hpp"

namespace hourglass::fleet {

namespace {

[[noreturn]] void bad(const char* what, const redis_reply& r) {
  throw redis_unavailable(std::string("redis: ") + what + ": " + (r.is_error() ? r.str : "unexpected reply"));
}

std::vector<stream_entry> entries_of(const redis_reply& list, const char* what) {
  if (!list.is_array()) bad(what, list);
  std::vector<stream_entry> out;
  out.reserve(list.elements.size());
  for (const redis_reply& e : list.elements) {
    if (!e.is_array() || e.elements.size() != 2 || !e.elements[0].is_string()) bad(what, e);
    stream_entry s;
    s.id = e.elements[0].str;
    const redis_reply& kv = e.elements[1];
    if (kv.is_nil()) {
      s.deleted = true;
    } else {
      if (!kv.is_array() || kv.elements.size() % 2 != 0) bad(what, kv);
      for (std::size_t i = 0; i < kv.elements.size(); i += 2)
        s.fields.emplace_back(kv.elements[i].str, kv.elements[i + 1].str);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<stream_entry> read_entries(const redis_reply& r) {
  if (r.is_nil()) return {};
  if (!r.is_array()) bad("XREADGROUP", r);
  std::vector<stream_entry> out;
  for (const redis_reply& stream : r.elements) {
    if (!stream.is_array() || stream.elements.size() != 2) bad("XREADGROUP", stream);
    std::vector<stream_entry> part = entries_of(stream.elements[1], "XREADGROUP");
    out.insert(out.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return out;
}

auto_claimed read_auto_claim(const redis_reply& r) {
  if (!r.is_array() || r.elements.size() < 2 || !r.elements[0].is_string()) bad("XAUTOCLAIM", r);
  auto_claimed c;
  c.cursor = r.elements[0].str;
  c.entries = entries_of(r.elements[1], "XAUTOCLAIM");
  if (r.elements.size() > 2 && r.elements[2].is_array()) {
    for (const redis_reply& id : r.elements[2].elements) c.deleted.push_back(id.str);
  }
  return c;
}

}  // namespace hourglass::fleet
