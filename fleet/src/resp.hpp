// RESP through hiredis: commands encoded by redisFormatCommandArgv, replies
// parsed by a redisReader and copied into redis_reply. Internal to fleet/.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "hourglass/fleet/redis.hpp"

struct redisReader;

namespace hourglass::fleet::detail {

// The command's bytes on the wire. Throws std::bad_alloc when hiredis cannot allocate.
std::string format_command(const std::vector<std::string>& args);

// Incremental reply parser. Not thread-safe.
class reply_reader {
 public:
  explicit reply_reader(std::size_t max_buffered);
  ~reply_reader();
  reply_reader(const reply_reader&) = delete;
  reply_reader& operator=(const reply_reader&) = delete;

  // Throws redis_unavailable on a protocol error or when more than
  // `max_buffered` bytes wait without completing a reply.
  void feed(const char* data, std::size_t n);
  // The next complete reply, if one has arrived.
  std::optional<redis_reply> next();

 private:
  redisReader* reader_;
  std::size_t max_buffered_;
};

}  // namespace hourglass::fleet::detail
