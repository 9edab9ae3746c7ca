#include "alloc_counter.hpp"

#include <cstdlib>
#include <new>

namespace {
thread_local std::uint64_t allocations = 0;
thread_local std::uint64_t allocated_bytes = 0;
}  // namespace

namespace hourglass::bench {
std::uint64_t thread_allocations() noexcept { return allocations; }
std::uint64_t thread_allocated_bytes() noexcept { return allocated_bytes; }
}  // namespace hourglass::bench

void* operator new(std::size_t n) {
  ++allocations;
  allocated_bytes += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  ++allocations;
  allocated_bytes += n;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
