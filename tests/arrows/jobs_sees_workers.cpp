// Must NOT compile: a job's life is a rule over outcomes, not an executor's.
#include "hourglass/executor.hpp"
