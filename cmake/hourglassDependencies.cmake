# Every dependency comes from Debian 12 packages; nothing is downloaded at build time.
include(GNUInstallDirs)
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(Boost 1.81 REQUIRED)

# moodycamel ships no CMake config in Debian (libconcurrentqueue-dev): find the
# header ourselves. Only queue/ includes it, through one adapter header.
find_path(HOURGLASS_CONCURRENTQUEUE_DIR concurrentqueue/concurrentqueue.h REQUIRED)
add_library(hourglass_concurrentqueue INTERFACE)
target_include_directories(hourglass_concurrentqueue SYSTEM INTERFACE ${HOURGLASS_CONCURRENTQUEUE_DIR})
