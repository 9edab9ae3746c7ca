// Must NOT compile: the hourglass command speaks HTTP to a daemon and knows
// nothing of how the daemon is built.
#include "hourglass/server/http_server.hpp"
