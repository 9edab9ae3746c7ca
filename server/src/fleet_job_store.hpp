// hourglassd --broker: the job store on the fleet's Redis queue
// (docs/fleet.md, docs/reference/fleet-layout.md). Internal to the server.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "job_store.hpp"

namespace hourglass::server::detail {

// On core's broker options; `port` names the consumer when --consumer is not
// given (<hostname>:<port>). Connects lazily; start() claims the name.
std::unique_ptr<job_store> make_fleet_job_store(core& c, std::uint16_t port);

// An Idempotency-Key header: 1-128 printable ASCII characters.
bool valid_idempotency_key(std::string_view key) noexcept;

}  // namespace hourglass::server::detail
