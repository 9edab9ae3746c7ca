// A user embedding the daemon: their own handler behind hourglass::server,
// answered over real HTTP on a loopback port. Exit 0 iff the answer is right.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstdio>
#include <string>

#include <hourglass/server/http_server.hpp>

int main() {
  namespace http = boost::beast::http;
  hourglass::server::server_options o;
  o.listen = "127.0.0.1:0";
  o.workers = 1;
  hourglass::server::http_server srv(o);
  srv.add_handler("shout", [](const hourglass::context& ctx, const hourglass::server::request_view& req) {
    ctx.check();
    std::string out(req.body);
    for (char& c : out) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return hourglass::server::handler_result{out, "text/plain"};
  });
  srv.start();

  boost::asio::io_context io;
  boost::asio::ip::tcp::socket sock(io);
  boost::asio::connect(sock, boost::asio::ip::tcp::resolver(io).resolve("127.0.0.1", std::to_string(srv.port())));
  http::request<http::string_body> req{http::verb::post, "/v1/jobs/shout", 11};
  req.set(http::field::host, "localhost");
  req.set("Request-Timeout", "5S");
  req.body() = "hello";
  req.prepare_payload();
  http::write(sock, req);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(sock, buf, res);
  std::printf("%u %s\n", res.result_int(), res.body().c_str());
  const bool ok = res.result_int() == 200 && res.body() == "HELLO" && !res["Server-Timing"].empty();
  srv.drain();
  return ok ? 0 : 1;
}
