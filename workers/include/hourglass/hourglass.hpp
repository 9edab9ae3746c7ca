// The whole embedding API of hourglass in one include.
#pragma once

// runtime/: time, clock, cancellation, context, codec, retries, stats
#include "hourglass/budget_codec.hpp"
#include "hourglass/cancellation.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/exposition.hpp"
#include "hourglass/histogram.hpp"
#include "hourglass/metrics.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/retry.hpp"
#include "hourglass/time.hpp"

// queue/: admission policy and the bounded admission queue
#include "hourglass/admission_policy.hpp"
#include "hourglass/admission_queue.hpp"

// workers/: the executor, fan-out, and the bridge to Boost.Asio
#include "hourglass/asio_bridge.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/fan_out.hpp"
#include "hourglass/job.hpp"
