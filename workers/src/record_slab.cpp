// Records are carved from slabs by the submitting thread and freed by
// whoever drops a slab's last record (hourglass/detail/job_record.hpp).
#include <atomic>
#include <cstddef>
#include <new>
#include <utility>

#include "hourglass/detail/job_record.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

// GCC says ASan is on with __SANITIZE_ADDRESS__, clang with __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define HOURGLASS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HOURGLASS_ASAN 1
#endif
#endif

#ifdef HOURGLASS_ASAN
#include <sanitizer/asan_interface.h>
#define HOURGLASS_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define HOURGLASS_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define HOURGLASS_POISON(p, n) ((void)(p), (void)(n))
#define HOURGLASS_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace hourglass {

namespace detail {

namespace {

// Slabs whose records are all gone, kept for the next slab a carver needs.
// Freeing them went to glibc's arena of the submitting thread, from a worker,
// and its lock then woke the submitter through a futex; the heap's top was
// trimmed and faulted in again as the backlog moved: together ~15 % of the
// submitter's samples in `hourglass-bench throughput`. One list
// for the process, so no slab outlives the list it goes back to; at most
// `limit` slabs (1 MiB) are kept, the rest are freed as before.
// Pushed one by one by any thread, taken whole by a carver (an exchange):
// with no single pop there is no ABA. `count` covers the list and the slabs
// carvers took from it and have not used yet.
struct spare_slabs {
  static constexpr std::size_t limit = 128;
  struct link {
    link* next;
  };
  std::atomic<link*> head{nullptr};
  std::atomic<std::size_t> count{0};

  // false: the list is full, free it.
  bool keep(void* mem) noexcept {
    if (count.fetch_add(1, std::memory_order_relaxed) >= limit) {
      count.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    push(mem);
    return true;
  }
  void push(void* mem) noexcept {
    auto* l = ::new (mem) link{head.load(std::memory_order_relaxed)};
    HOURGLASS_POISON(static_cast<char*>(mem) + sizeof(link), record_slab::bytes - sizeof(link));
    while (!head.compare_exchange_weak(l->next, l, std::memory_order_release, std::memory_order_relaxed)) {
    }
  }
  link* take_all() noexcept { return head.exchange(nullptr, std::memory_order_acquire); }
};

constinit spare_slabs spares;  // trivially destructible: still usable by slabs released at exit

}  // namespace

void* record_slab::carver::spare() noexcept {
  if (spare_ == nullptr) spare_ = spares.take_all();
  if (spare_ == nullptr) return nullptr;
  auto* l = static_cast<spare_slabs::link*>(spare_);
  spare_ = l->next;
  spares.count.fetch_sub(1, std::memory_order_relaxed);
  HOURGLASS_UNPOISON(l, bytes);
  return l;
}

bool record_slab::carver::cpu_prefetches_for_write() noexcept {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) != 0) return ((ecx >> 8) & 1u) != 0;  // PRFCHW
#endif
  return false;
}

record_slab::carver::~carver() {
  while (spare_ != nullptr) {  // taken, not used: back to the list (still counted)
    auto* l = static_cast<spare_slabs::link*>(spare_);
    spare_ = l->next;
    spares.push(l);
  }
  if (current_ != nullptr &&
      current_->refs_.fetch_sub(open_bias - carved_, std::memory_order_acq_rel) == open_bias - carved_) {
    destroy(current_);
  }
}

void record_slab::carver::next_slab() noexcept {
  if (current_ != nullptr) {
    // Retire: from now on the count is exactly the records still alive.
    record_slab* old = std::exchange(current_, nullptr);
    if (old->refs_.fetch_sub(open_bias - carved_, std::memory_order_acq_rel) == open_bias - carved_) destroy(old);
  }
  void* mem = spare();
  if (mem == nullptr) {
    try {
      mem = ::operator new(bytes);  // paired with the plain operator delete in destroy()
    } catch (const std::bad_alloc&) {
      return;  // submit falls back to a heap record of its own (and reports bad_alloc there)
    }
  }
  current_ = ::new (mem) record_slab();
  used_ = header;
  carved_ = 0;
}

void record_slab::destroy(record_slab* s) noexcept {
  s->~record_slab();
  if (!spares.keep(s)) ::operator delete(static_cast<void*>(s));
}

}  // namespace detail

}  // namespace hourglass
