#include "resp.hpp"

#include <hiredis/hiredis.h>

#include <new>

namespace hourglass::fleet::detail {

std::string format_command(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const int n = redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), lens.data());
  if (n < 0 || cmd == nullptr) throw std::bad_alloc();
  std::string out(cmd, static_cast<std::size_t>(n));
  redisFreeCommand(cmd);
  return out;
}

namespace {

redis_reply copy_reply(const redisReply& r) {
  redis_reply out;
  switch (r.type) {
    case REDIS_REPLY_STRING: out.kind = redis_reply::type::string; break;
    case REDIS_REPLY_STATUS: out.kind = redis_reply::type::status; break;
    case REDIS_REPLY_ERROR: out.kind = redis_reply::type::error; break;
    case REDIS_REPLY_INTEGER: out.kind = redis_reply::type::integer; break;
    case REDIS_REPLY_ARRAY: out.kind = redis_reply::type::array; break;
    default: out.kind = redis_reply::type::nil; break;
  }
  if (r.str != nullptr) out.str.assign(r.str, r.len);
  out.integer = r.integer;
  out.elements.reserve(r.elements);
  for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(copy_reply(*r.element[i]));
  return out;
}

// hiredis allocates an array's element pointers from its header alone, so
// "*277777777\r\n" asks for 2 GB before a byte of the elements arrives
// (found by fuzz/resp_reply_fuzz; hiredis 1.0 has maxelements, Debian's 0.14
// does not). The default functions, but an array whose elements could not
// fit in the reply limit (4 bytes each at least: ":1\r\n") is refused.
void* bounded_array(const redisReadTask* task, int elements);

const redisReplyObjectFunctions& bounded_functions() {
  static const redisReplyObjectFunctions fns = [] {
    redisReader* probe = redisReaderCreate();
    if (probe == nullptr) throw std::bad_alloc();
    redisReplyObjectFunctions f = *probe->fn;
    redisReaderFree(probe);
    return f;
  }();
  return fns;
}

redisReplyObjectFunctions bounded_table() {
  redisReplyObjectFunctions f = bounded_functions();
  f.createArray = bounded_array;
  return f;
}

void* bounded_array(const redisReadTask* task, int elements) {
  const auto* limit = static_cast<const std::size_t*>(task->privdata);
  if (limit != nullptr && elements > 0 && static_cast<std::size_t>(elements) > *limit / 4)
    return nullptr;  // "Out of memory"
  return bounded_functions().createArray(task, elements);
}

}  // namespace

reply_reader::reply_reader(std::size_t max_buffered) : max_buffered_(max_buffered) {
  static redisReplyObjectFunctions table = bounded_table();
  reader_ = redisReaderCreateWithFunctions(&table);
  if (reader_ == nullptr) throw std::bad_alloc();
  reader_->privdata = &max_buffered_;
}

reply_reader::~reply_reader() { redisReaderFree(reader_); }

void reply_reader::feed(const char* data, std::size_t n) {
  if (redisReaderFeed(reader_, data, n) != REDIS_OK) throw redis_unavailable("redis: " + std::string(reader_->errstr));
  if (reader_->len - reader_->pos > max_buffered_) throw redis_unavailable("redis: reply larger than the limit");
}

std::optional<redis_reply> reply_reader::next() {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    throw redis_unavailable("redis: protocol error (or an array larger than the reply limit): " +
                            std::string(reader_->errstr));
  }
  if (raw == nullptr) return std::nullopt;
  redisReply* r = static_cast<redisReply*>(raw);
  redis_reply out = copy_reply(*r);
  freeReplyObject(r);
  return out;
}

}  // namespace hourglass::fleet::detail
