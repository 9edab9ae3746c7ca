// A job's streamed output on its way to a reader: a bounded buffer of bytes
// between the job (write, on its worker) and whoever delivers them (take, on
// any thread: the daemon's connection, an embedder's own writer).
//
//   auto out = std::make_shared<hourglass::output_channel>();
//   ex.submit(opts, [out](const context& ctx) {
//     for (auto& row : rows) out->write(ctx, render(row));  // progress on each
//     return 0;
//   }, on_done);
//   out->on_readable([&] { wake_the_sender(); });           // then take() on its thread
//
// Rules (docs/guards.md, "Streaming responses"):
//  - write(ctx, chunk) of an empty chunk does nothing (it is not output).
//    Otherwise it waits while `capacity` bytes or more are buffered: a
//    slow reader holds the job back, and that wait counts against the job's
//    deadline and is not progress, so an idle limit can stop a job stuck
//    behind a reader that stopped reading. Then it appends the whole chunk
//    and reports progress on ctx (ctx.progress()).
//  - The wait ends the moment ctx stops (deadline, idle limit, cancel):
//    write throws stopped_error with ctx's reason. Once the reader closed,
//    write throws stopped_error(cancelled/caller_gone): nobody will read it.
//  - take() hands over everything buffered and wakes a waiting writer.
//  - on_readable(fn): fn runs once, as soon as bytes are buffered: at once
//    (on the caller's thread) when they already are, else on the writer's
//    thread right after its write. Each call replaces an earlier one.
//
// Thread safety: every member may be called from any thread; chunks keep
// the order of their writes.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "hourglass/context.hpp"

namespace hourglass {

class output_channel {
 public:
  static constexpr std::size_t default_capacity = 64 * 1024;

  explicit output_channel(std::size_t capacity = default_capacity) : capacity_(capacity) {}
  output_channel(const output_channel&) = delete;
  output_channel& operator=(const output_channel&) = delete;

  void write(const context& ctx, std::string_view chunk);

  std::string take();
  void on_readable(std::function<void()> fn);
  // The reader is gone: a waiting and every later write throws.
  void close() noexcept;

  std::size_t buffered() const;
  bool closed() const;
  std::uint64_t bytes_written() const;  // every byte a write ever accepted
  // Writes waiting in write() for room now (tests wait for a writer held back).
  std::size_t waiting_writers() const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable room_;
  std::string buffer_;
  std::function<void()> readable_;
  std::uint64_t written_ = 0;
  std::size_t waiting_ = 0;
  bool closed_ = false;
};

}  // namespace hourglass
