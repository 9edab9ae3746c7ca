// What hourglassd's fleet mode plugs into the fleet: its broker clients,
// and the runner that runs a delivered job with the daemon's handlers.
// Internal to the server (fleet_job_store.cpp).
#pragma once

#include <memory>
#include <string>

#include "core/core.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/url.hpp"

namespace hourglass::server::detail {

// A client of the broker (one Redis, or a cluster), AUTH with
// --broker-password-file; its changes of state logged as "fleet (<role>)".
std::unique_ptr<fleet::redis_client> connect_fleet_broker(core& c, const support::broker_url& u, const char* role);

// Runs a delivered job with the daemon's handler of its name.
fleet::job_runner fleet_runner(core& c);

// This host's name ("localhost" when it has none): a consumer's default name.
std::string this_host_name();

}  // namespace hourglass::server::detail
