// Must NOT compile: the broker client knows nothing of HTTP.
#include "hourglass/server/http_server.hpp"
