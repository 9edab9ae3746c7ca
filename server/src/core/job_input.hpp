// A job's request as its job sees it, whoever made it: a client's request
// (the session), an item of a bulk request, a child a handler enqueued, a
// schedule's fire. No HTTP type: the transport reads the message and builds
// this once; the stores and the handlers see only this. Shared between its
// maker and the job, which may outlive it. Internal to the server.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/core.hpp"
#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

struct job_input {
  const handler_entry* entry = nullptr;
  std::string body;
  std::string content_type;                    // "" when none was sent
  std::optional<std::string> idempotency_key;  // as sent (the store judges it); nullopt: none sent
  std::string traceparent;                     // W3C trace context; "" when none
  std::string remote;                          // the caller's "addr:port", or who made it ("schedule", "child of …")
  // Any other header of the request it came in (a bulk item: the bulk
  // request's), by name, case-insensitive; "" when absent. Unset for a
  // child or a fire. Whoever sets it keeps what it reads alive.
  std::function<std::string_view(std::string_view)> other_header;
  duration budget{};
  duration idle_limit = duration::max();  // the tighter of the handler's and Job-Idle-Timeout
  bool async = false;

  // A header as the handler reads it (request_view::header): the job's own
  // Content-Type, Idempotency-Key and traceparent; no framing header (the
  // body is whole); else other_header's.
  std::string_view header(std::string_view name) const;
  request_view view() const;
};

// The input of a periodic job's fire: its handler, body and content type,
// as a request of its own would bring them.
std::shared_ptr<job_input> fire_input(const handler_entry& e, const std::string& body, const std::string& content_type);

}  // namespace hourglass::server::detail
