// Counts heap allocations made by the calling thread (the micro benchmark
// binary replaces the global operator new), so a benchmark can report
// allocations per operation: admission's refusal path promises zero.
#pragma once

#include <cstdint>

namespace hourglass::bench {
std::uint64_t thread_allocations() noexcept;
std::uint64_t thread_allocated_bytes() noexcept;  // bytes asked of operator new, freed or not
}  // namespace hourglass::bench
