// The whole embedding API of hourglass in one include.
#pragma once

#include "hourglass/budget_codec.hpp"
#include "hourglass/cancellation.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"
