// Asio and Beast in separate-compilation mode are compiled here, once, for
// everything that links hourglass::asio (fleet, server, support and what sits
// on them). Header-only, every file that includes an Asio or Beast header
// compiled their non-template parts (the reactor, the scheduler, socket_ops,
// the HTTP parser) again.
#include <boost/asio/impl/src.hpp>
#include <boost/beast/src.hpp>
