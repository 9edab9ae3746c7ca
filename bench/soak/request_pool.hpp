// A small pool of keep-alive HTTP/1.1 connections for the soak's own
// requests: async submissions, their polls, /metrics scrapes and the
// capacity probe. Any method, target and headers, one request in flight per
// connection, the rest wait in line (FIFO).
//
// Why not bench/http: its connections live inside run_http's open-loop
// generator, which sends only one POST with a fixed body; the soak uses
// run_http as it is for its sync load and this pool for everything else.
//
// Not thread-safe: every member runs on the io_context's one thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/verb.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hourglass/time.hpp"

namespace hourglass::bench {

struct pool_request {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct pool_answer {
  bool answered = false;  // an HTTP response came back, whatever its status
  int status = 0;
  std::string body;
  std::string location;  // the Location header, if any
  std::string failure;   // why there is no answer, when !answered
};

class request_pool {
 public:
  using callback = std::function<void(pool_answer)>;

  // `timeout` bounds each request from its send (connect included) to the
  // end of its response; past it the request fails as unanswered.
  request_pool(boost::asio::io_context& io, boost::asio::ip::tcp::resolver::results_type endpoints,
               std::string host_header, std::size_t connections, duration timeout);
  ~request_pool();
  request_pool(const request_pool&) = delete;
  request_pool& operator=(const request_pool&) = delete;

  // `done` is called exactly once, on the io_context's thread.
  void submit(pool_request request, callback done);
  // Submitted and not yet answered or failed (waiting or on the wire).
  std::size_t pending() const noexcept { return waiting_.size() + busy_; }
  // Closes every connection; requests in flight fail, waiting ones too.
  void close();

 private:
  struct connection;
  struct queued {
    pool_request request;
    callback done;
  };

  void dispatch();
  void send(connection& c);
  void write(connection& c);
  void finish(connection& c, pool_answer answer);

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::resolver::results_type endpoints_;
  std::string host_header_;
  duration timeout_;
  std::vector<std::unique_ptr<connection>> connections_;
  std::deque<queued> waiting_;
  std::size_t busy_ = 0;
};

}  // namespace hourglass::bench
