// A daemon's HTTP API as the hourglass command calls it: one request at a
// time on one keep-alive connection, each bounded by a timeout.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hourglass::ctl {

struct api_target {
  std::string url = "http://127.0.0.1:8080";  // the daemon: http://HOST[:PORT]
  std::string token;                          // for reads and cancels (--auth-token-file's)
  std::string admin_token;                    // for the admin actions (--admin-token-file's)
  std::chrono::milliseconds timeout{10'000};  // each request, connect to last byte
};

struct api_reply {
  unsigned status = 0;
  std::string body;
};

class api_client {
 public:
  // Throws std::invalid_argument for a URL that is not http://HOST[:PORT].
  explicit api_client(api_target target);
  ~api_client();
  api_client(const api_client&) = delete;
  api_client& operator=(const api_client&) = delete;

  // `admin`: with the admin token instead of the access token. Throws
  // std::runtime_error naming the daemon when it cannot be reached in time
  // or answers something that is not HTTP.
  api_reply call(std::string_view method, std::string_view target, bool admin = false,
                 const std::vector<std::pair<std::string, std::string>>& headers = {});

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hourglass::ctl
