// Must NOT compile: the core never sees the daemon.
#include "hourglass/server/http_server.hpp"
