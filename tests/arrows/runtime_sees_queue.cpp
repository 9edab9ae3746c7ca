// Must NOT compile: runtime/ depends on nothing of ours, so the queue's
// headers are not on its include path (tests/arrows/CMakeLists.txt).
#include "hourglass/admission_queue.hpp"
