// The soak's misbehaving clients, one connection each. The daemon closes a
// connection whose headers or body arrive too slowly (--header-timeout,
// --body-timeout: docs/reference/http-api.md), so slow clients hold neither
// connections nor workers; these check that promise, over and over, while the daemon is
// overloaded:
//  - header_trickle: a request line, then a header one byte every 500 ms;
//  - body_trickle: complete headers announcing 100000 bytes, then one byte every 500 ms;
//  - never_read: eight pipelined 1 MB echo jobs on a 4 KiB receive buffer, never
//    read, so the daemon's writes stall. Judged on the daemon's end of the connection,
//    which /proc/net/tcp shows on this host: held if it stays ESTABLISHED with its
//    send queue stuck for `hold` (a daemon still writing is not stalled yet);
//  - abandon: a sync spin job, the connection closed 20 ms later (the daemon
//    should cancel the job; nothing to judge from outside but the resources).
// The first three must be closed by the daemon within `hold`, or they are "held".
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "hourglass/time.hpp"

namespace hourglass::bench {

enum class misbehaving_kind { header_trickle, body_trickle, never_read, abandon };
inline constexpr std::uint64_t misbehaving_kinds = 4;
const char* to_string(misbehaving_kind k) noexcept;

class misbehaving_client : public std::enable_shared_from_this<misbehaving_client> {
 public:
  // Told what happened, each client once (but on_gone, which comes last).
  class owner {
   public:
    // `after_s`: from connecting to the daemon's close, when it is known.
    virtual void on_closed_by_server(std::optional<double> after_s) = 0;
    virtual void on_held(misbehaving_kind kind) = 0;
    virtual void on_connect_failed() = 0;
    virtual void on_abandoned() = 0;
    virtual void on_gone(misbehaving_client* c) = 0;  // closed: forget it

   protected:
    ~owner() = default;
  };

  struct settings {
    std::string host_header;
    duration hold;          // how long the daemon has to close us
    duration budget;        // of the abandoned job
    std::string spin_body;  // of the abandoned job
  };

  misbehaving_client(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint daemon, owner& o,
                     misbehaving_kind kind, settings s);
  void start();
  // Closes the connection now; true when it had not been judged yet.
  bool stop();

 private:
  void on_connected();
  void drip();
  void watch_for_close();
  void watch_daemon_side();
  void closed_by_server(std::optional<double> after_s);
  void held();
  void gone();
  double age_s() const;

  boost::asio::ip::tcp::socket socket_;
  boost::asio::ip::tcp::endpoint daemon_;
  boost::asio::steady_timer drip_timer_, hold_timer_;
  owner& owner_;
  misbehaving_kind kind_;
  settings s_;
  std::string request_;
  std::array<char, 16 * 1024> scratch_{};
  time_point opened_{};
  time_point last_progress_{};  // never_read: when the daemon's send queue last moved
  std::uint64_t last_send_queue_ = 0;
  std::uint16_t local_port_ = 0;
  bool connected_ = false;
  bool judged_ = false;
  bool gone_ = false;
};

}  // namespace hourglass::bench
