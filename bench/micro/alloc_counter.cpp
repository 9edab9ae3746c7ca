#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::uint64_t allocations = 0;
}

namespace hourglass::bench {
std::uint64_t thread_allocations() noexcept { return allocations; }
}  // namespace hourglass::bench

void* operator new(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
