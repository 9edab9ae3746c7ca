// Must NOT compile: support/ (JSON, URLs, the CLI glue) needs only the
// runtime; leaning on the executor would tie the programs' helpers to it.
#include "hourglass/executor.hpp"
