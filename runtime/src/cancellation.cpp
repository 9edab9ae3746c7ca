#include "hourglass/cancellation.hpp"

#include <cassert>

namespace hourglass::detail {

std::uint32_t cancellation_state::pack(status s) noexcept {
  // Bit 31 marks "stopped" so that even an all-zero status would not read as 0.
  return 0x80000000u | static_cast<std::uint32_t>(s.code) | static_cast<std::uint32_t>(s.reason) << 8 |
         static_cast<std::uint32_t>(s.stage) << 16 | static_cast<std::uint32_t>(s.cause) << 24;
}

status cancellation_state::unpack(std::uint32_t v) noexcept {
  if (v == 0) return status::ok();
  status s;
  s.code = static_cast<outcome>(v & 0xff);
  s.reason = static_cast<reject_reason>((v >> 8) & 0xff);
  s.stage = static_cast<expiry_stage>((v >> 16) & 0xff);
  s.cause = static_cast<cancel_cause>((v >> 24) & 0x7f);
  return s;
}

bool cancellation_state::request_stop(status why) noexcept {
  std::unique_lock lock(mu_);
  std::uint32_t expected = 0;
  if (!reason_.compare_exchange_strong(expected, pack(why), std::memory_order_acq_rel)) return false;
  firing_thread_ = std::this_thread::get_id();
  while (head_ != nullptr) {
    callback_node* node = head_;
    head_ = node->next;
    if (head_ != nullptr) head_->prev = nullptr;
    node->linked = false;
    --count_;
    running_ = node;
    bool destroyed = false;
    node->destroyed_while_running = &destroyed;
    lock.unlock();
    node->invoke(node);
    lock.lock();
    if (!destroyed) node->destroyed_while_running = nullptr;
    running_ = nullptr;
    done_running_.notify_all();
  }
  return true;
}

bool cancellation_state::add(callback_node* node) noexcept {
  std::lock_guard lock(mu_);
  if (stop_requested()) return false;
  node->prev = nullptr;
  node->next = head_;
  if (head_ != nullptr) head_->prev = node;
  head_ = node;
  node->linked = true;
  ++count_;
  return true;
}

void cancellation_state::remove(callback_node* node) noexcept {
  std::unique_lock lock(mu_);
  if (node->linked) {
    if (node->prev != nullptr) node->prev->next = node->next;
    else head_ = node->next;
    if (node->next != nullptr) node->next->prev = node->prev;
    node->linked = false;
    --count_;
    return;
  }
  if (running_ != node) return;  // already ran (or never registered)
  if (firing_thread_ == std::this_thread::get_id()) {
    // The callback is destroying itself: tell the firing loop not to touch it.
    if (node->destroyed_while_running != nullptr) *node->destroyed_while_running = true;
    return;
  }
  done_running_.wait(lock, [&] { return running_ != node; });
}

std::size_t cancellation_state::registered_callbacks() const noexcept {
  std::lock_guard lock(mu_);
  return count_;
}

}  // namespace hourglass::detail
