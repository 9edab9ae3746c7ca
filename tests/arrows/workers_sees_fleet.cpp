// Must NOT compile: the executor knows nothing of brokers.
#include "hourglass/fleet/redis.hpp"
