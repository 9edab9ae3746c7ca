// GET /v1/jobs?state=&handler=&cursor=&limit=: jobs by state, a page at a
// time. The query read as a pure function (docs/reference/http-api.md,
// "Listing jobs"); the store walks its jobs (job_store::list). Internal to
// the server.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "core/job_store.hpp"

namespace hourglass::server::detail {

inline constexpr std::size_t default_list_limit = 100;
inline constexpr std::size_t max_list_limit = 1000;

// Why a listing's query cannot be read: 400 invalid_query with `message`.
struct list_query_error {
  std::string message;
};

// The request target's query: state (one of the job states, "finished",
// "retrying" or absent for any), handler, cursor (as a page returned it),
// limit (1 to max_list_limit). Unknown parameters are refused, as a
// misspelt filter would otherwise list everything.
std::variant<list_request, list_query_error> read_list_query(std::string_view target);

// DELETE /v1/queues/{name}/dead's query: limit (1 to max_list_limit,
// default default_list_limit) and confirm=yes, which a purge needs.
struct purge_reading {
  std::size_t limit = default_list_limit;
  std::string error;  // not "": 400 invalid_query with this message
};
// `unconfirmed`: the 400's message without confirm=yes (a purge's by default).
purge_reading read_purge_query(std::string_view target,
                               std::string_view unconfirmed = "a purge deletes dead jobs for good: add confirm=yes");

// {"jobs": [job objects], "next_cursor": "..." or null}.
std::string job_page_json(const job_page& page);

}  // namespace hourglass::server::detail
