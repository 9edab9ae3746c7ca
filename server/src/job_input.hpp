// A request as its job sees it: the whole message, its handler, its budget.
// Shared between the session and the job, which may outlive the session.
// Internal to the server.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <memory>
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

// The input of a periodic job's fire: its handler, body and content type,
// as a request of its own would bring them.
inline std::shared_ptr<job_input> fire_input(const handler_entry& e, const std::string& body,
                                             const std::string& content_type) {
  auto in = std::make_shared<job_input>();
  in->msg.method(boost::beast::http::verb::post);
  in->msg.target("/v1/jobs/" + e.name);
  in->msg.set(boost::beast::http::field::content_type, content_type);
  in->msg.body() = body;
  in->msg.prepare_payload();
  in->entry = &e;
  in->async = true;
  in->budget = e.run_limit;
  in->idle_limit = e.idle_limit;
  in->remote = "schedule";
  return in;
}

}  // namespace hourglass::server::detail
