#include "hourglass/output_channel.hpp"

#include <utility>

namespace hourglass {

void output_channel::write(const context& ctx, std::string_view chunk) {
  ctx.check();
  if (chunk.empty()) return;  // no output: neither progress nor a first byte
  std::function<void()> notify;
  {
    // Registered before the lock is taken and dropped after it is released:
    // a stop that fires while this thread waits takes the lock to wake it,
    // and the callback's destructor waits for a callback still running.
    cancellation_callback wake(ctx.token(), [this]() noexcept {
      std::lock_guard lock(mu_);
      room_.notify_all();
    });
    std::unique_lock lock(mu_);
    ++waiting_;
    room_.wait(lock, [&] { return closed_ || buffer_.size() < capacity_ || ctx.token().stop_requested(); });
    --waiting_;
    if (closed_) {
      lock.unlock();
      throw stopped_error(status::cancelled(cancel_cause::caller_gone));
    }
    if (ctx.token().stop_requested()) {
      lock.unlock();
      ctx.check();
    }
    buffer_.append(chunk);
    written_ += chunk.size();
    notify = std::exchange(readable_, nullptr);
  }
  ctx.progress();
  if (notify) notify();
}

std::string output_channel::take() {
  std::string out;
  {
    std::lock_guard lock(mu_);
    out.swap(buffer_);
  }
  room_.notify_all();
  return out;
}

void output_channel::on_readable(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (buffer_.empty()) {
      readable_ = std::move(fn);
      return;
    }
    readable_ = nullptr;
  }
  fn();
}

void output_channel::close() noexcept {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    readable_ = nullptr;
  }
  room_.notify_all();
}

std::size_t output_channel::buffered() const {
  std::lock_guard lock(mu_);
  return buffer_.size();
}

bool output_channel::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

std::size_t output_channel::waiting_writers() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

std::uint64_t output_channel::bytes_written() const {
  std::lock_guard lock(mu_);
  return written_;
}

}  // namespace hourglass
