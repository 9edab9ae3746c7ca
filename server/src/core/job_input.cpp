#include "core/job_input.hpp"

#include "terms/terms.hpp"

namespace hourglass::server::detail {

std::string_view job_input::header(std::string_view name) const {
  if (iequals(name, "content-type")) return content_type;
  if (iequals(name, "idempotency-key"))
    return idempotency_key ? std::string_view(*idempotency_key) : std::string_view();
  if (iequals(name, "traceparent")) return traceparent;
  if (iequals(name, "content-length") || iequals(name, "transfer-encoding")) return {};
  return other_header ? other_header(name) : std::string_view();
}

request_view job_input::view() const {
  request_view v;
  v.handler = entry->name;
  v.body = body;
  v.content_type = content_type;
  v.traceparent = traceparent;
  v.remote = remote;
  v.budget = budget;
  v.async = async;
  if (idempotency_key) v.idempotency_key = *idempotency_key;
  v.header_lookup = [this](std::string_view name) { return header(name); };
  return v;
}

std::shared_ptr<job_input> fire_input(const handler_entry& e, const std::string& body,
                                      const std::string& content_type) {
  auto in = std::make_shared<job_input>();
  in->entry = &e;
  in->body = body;
  in->content_type = content_type;
  in->async = true;
  in->budget = e.run_limit;
  in->idle_limit = e.idle_limit;
  in->remote = "schedule";
  return in;
}

}  // namespace hourglass::server::detail
