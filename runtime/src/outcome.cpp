#include "hourglass/outcome.hpp"

namespace hourglass {

std::string_view describe(const status& s) noexcept {
  switch (s.code) {
    case outcome::ok: return "ok";
    case outcome::error: return "error";
    case outcome::rejected:
      switch (s.reason) {
        case reject_reason::shutting_down: return "rejected/shutting_down";
        case reject_reason::broker_unavailable: return "rejected/broker_unavailable";
        case reject_reason::circuit_open: return "rejected/circuit_open";
        case reject_reason::queue_paused: return "rejected/queue_paused";
        default: return "rejected/queue_full";
      }
    case outcome::deadline_exceeded:
      switch (s.stage) {
        case expiry_stage::admission: return "deadline_exceeded/admission";
        case expiry_stage::queue: return "deadline_exceeded/queue";
        case expiry_stage::downstream: return "deadline_exceeded/downstream";
        case expiry_stage::reclaim: return "deadline_exceeded/reclaim";
        case expiry_stage::idle: return "deadline_exceeded/idle";
        case expiry_stage::retry: return "deadline_exceeded/retry";
        case expiry_stage::human_wait: return "deadline_exceeded/human_wait";
        default: return "deadline_exceeded/run";
      }
    case outcome::cancelled:
      switch (s.cause) {
        case cancel_cause::caller_gone: return "cancelled/caller_gone";
        case cancel_cause::parent: return "cancelled/parent";
        case cancel_cause::sibling: return "cancelled/sibling";
        case cancel_cause::shutdown: return "cancelled/shutdown";
        default: return "cancelled/requested";
      }
    case outcome::invalid: return "invalid";
  }
  return "unknown";
}

}  // namespace hourglass
