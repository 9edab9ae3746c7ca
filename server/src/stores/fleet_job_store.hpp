// hourglassd --broker: the job store on the fleet's Redis queue
// (docs/fleet.md, docs/reference/fleet-layout.md). Internal to the server.
#pragma once

#include <cstdint>
#include <memory>

#include "core/job_store.hpp"

namespace hourglass::server::detail {

// On core's broker options; `port` names the consumer when --consumer is not
// given (<hostname>:<port>). Connects lazily; start() claims the name.
std::unique_ptr<job_store> make_fleet_job_store(core& c, std::uint16_t port);

}  // namespace hourglass::server::detail
