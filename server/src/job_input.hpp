// A request as its job sees it: the whole message, its handler, its budget.
// Shared between the session and the job, which may outlive the session.
// Internal to the server.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <string>
#include <string_view>

#include "core.hpp"
#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

struct job_input {
  boost::beast::http::request<boost::beast::http::string_body> msg;
  const handler_entry* entry = nullptr;
  duration budget{};
  duration idle_limit = duration::max();  // the tighter of the handler's and Job-Idle-Timeout
  bool async = false;
  std::string remote;

  request_view view() const {
    request_view v;
    v.handler = entry->name;
    v.body = msg.body();
    v.content_type = msg[boost::beast::http::field::content_type];
    v.traceparent = msg["traceparent"];
    v.remote = remote;
    v.budget = budget;
    v.async = async;
    v.idempotency_key = msg["Idempotency-Key"];
    v.header_lookup = [this](std::string_view name) -> std::string_view { return msg[name]; };
    return v;
  }
};

}  // namespace hourglass::server::detail
