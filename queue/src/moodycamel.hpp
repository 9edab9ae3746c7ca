// The one place hourglass includes moodycamel's queue (libconcurrentqueue-dev).
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>
#include <concurrentqueue/concurrentqueue.h>
