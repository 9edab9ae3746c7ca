// Records are carved from slabs by the submitting thread and freed by
// whoever drops a slab's last record (hourglass/detail/job_record.hpp).
#include <new>
#include <utility>

#include "hourglass/detail/job_record.hpp"

namespace hourglass {

namespace detail {

record_slab::carver::~carver() {
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
  void* mem;
  try {
    mem = ::operator new(bytes);  // paired with the plain operator delete in destroy()
  } catch (const std::bad_alloc&) {
    return;  // submit falls back to a heap record of its own (and reports bad_alloc there)
  }
  current_ = ::new (mem) record_slab();
  used_ = header;
  carved_ = 0;
}

void record_slab::destroy(record_slab* s) noexcept {
  s->~record_slab();
  ::operator delete(static_cast<void*>(s));
}

}  // namespace detail

}  // namespace hourglass
