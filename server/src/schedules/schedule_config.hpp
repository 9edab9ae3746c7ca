// Periodic jobs in the daemon's configuration: the repeatable flag
//   --schedule 'NAME|CRON|HANDLER[|BODY]'
// and in the TOML file, one table per schedule:
//   [[schedule]]
//   name = "nightly-report"   cron = "0 3 * * *"   zone = "Europe/Berlin"
//   handler = "report"        body = "{}"           content_type = "application/json"
//   freshness = "10m"         overlap = "skip"      (or "allow")
// Both throw std::invalid_argument naming the schedule and what is wrong.
// Also handlers' retry policies (--retry NAME=ATTEMPTS[,BASE[,CAP]][;jitter=none]).
// Internal to the server (config.cpp reads them; options.cpp checks them).
#pragma once

#include <toml++/toml.h>

#include <string>

#include "hourglass/server/options.hpp"

namespace hourglass::server::detail {

schedule_options schedule_from_flag(const std::string& text);
schedule_options schedule_from_toml(const toml::table& t);

// A handler's retry policy, "ATTEMPTS[,BASE[,CAP]][;jitter=none]" ("5,200ms,30s"): BASE
// and CAP default to the policy's (1s, 5m), CAP raised to BASE. Throws
// std::invalid_argument naming `handler` and what is wrong.
job_retry_policy retry_from_text(const std::string& handler, const std::string& text);

}  // namespace hourglass::server::detail
