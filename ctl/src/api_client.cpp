#include "hourglass/ctl/api_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <optional>
#include <stdexcept>

#include "hourglass/support/url.hpp"

namespace hourglass::ctl {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct api_client::impl {
  api_target target;
  support::http_url url;
  net::io_context io;
  std::optional<beast::tcp_stream> stream;
  beast::flat_buffer buffer;

  void reset() {
    stream.reset();
    buffer.clear();  // nothing of an exchange that broke is read as the next one's
  }

  void connect() {
    stream.emplace(io);
    stream->expires_after(target.timeout);
    net::ip::tcp::resolver resolver(io);
    stream->connect(resolver.resolve(url.host, std::to_string(url.port)));
  }

  api_reply exchange(const http::request<http::string_body>& req) {
    if (!stream) connect();
    stream->expires_after(target.timeout);
    http::write(*stream, req);
    // A page of 1,000 jobs with their results may be large: bounded, but not by Beast's 8 MB.
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{1} << 30);
    http::read(*stream, buffer, parser);
    http::response<http::string_body> res = parser.release();
    if (!res.keep_alive()) reset();
    return {res.result_int(), std::move(res.body())};
  }
};

api_client::api_client(api_target target) : impl_(std::make_unique<impl>()) {
  impl_->url = support::parse_http_url(target.url, "daemon URL");
  while (!impl_->url.path.empty() && impl_->url.path.back() == '/') impl_->url.path.pop_back();  // no "//v1/..."
  impl_->target = std::move(target);
}

api_client::~api_client() = default;

api_reply api_client::call(std::string_view method, std::string_view target, bool admin,
                           const std::vector<std::pair<std::string, std::string>>& headers) {
  http::request<http::string_body> req(http::string_to_verb(method), std::string(impl_->url.path) + std::string(target),
                                       11);
  req.set(http::field::host, impl_->url.host_header);
  req.set(http::field::user_agent, "hourglass");
  const std::string& token = admin ? impl_->target.admin_token : impl_->target.token;
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  for (const auto& [name, value] : headers) req.set(name, value);
  req.prepare_payload();
  const auto unreachable = [&](const boost::system::system_error& e) {
    impl_->reset();
    return std::runtime_error("cannot reach the daemon at " + impl_->target.url + ": " + e.code().message());
  };
  const bool reused = impl_->stream.has_value();
  try {
    return impl_->exchange(req);
  } catch (const boost::system::system_error& e) {
    // A kept-alive connection the daemon closed meanwhile fails at once; a
    // read is sent again on a new one, a change never (it may have landed).
    const bool read = req.method() == http::verb::get || req.method() == http::verb::head;
    if (!reused || !read || e.code() == http::error::body_limit) throw unreachable(e);
  }
  impl_->reset();
  try {
    return impl_->exchange(req);
  } catch (const boost::system::system_error& e) {
    throw unreachable(e);
  }
}

}  // namespace hourglass::ctl
