// Must NOT compile: queue/ sits below workers/.
#include "hourglass/executor.hpp"
