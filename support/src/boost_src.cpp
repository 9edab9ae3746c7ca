// Boost.JSON and Boost.URL in header-only mode are compiled here, once, for
// everything that links hourglass::support (server, bench, tests).
#include <boost/json/src.hpp>
#include <boost/url/src.hpp>
