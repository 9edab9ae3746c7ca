// The hourglass command: an operator's terminal over a daemon's API.
//
//   hourglass [--url URL] [--token-file F] [--admin-token-file F] [--json] COMMAND
//   queues [NAME] | jobs [--state S] [--handler H] [--limit N | --all] | job ID
//   cancel ID | replay ID [--freshness DUR] | pause [QUEUE] | resume [QUEUE]
//   delete ID [--queue Q] | purge [--queue Q] [--limit N] --yes
//   replay-dead [--queue Q] [--limit N] [--freshness DUR] --yes
//
// docs/reference/cli.md has the whole reference.
#pragma once

#include <iosfwd>

namespace hourglass::ctl {

// Exit codes: 0 done; 1 the daemon refused (its status and error are on
// `err`); 2 the daemon could not be asked (unreachable, a token file that
// cannot be read); CLI11's own codes for a command line it refuses.
inline constexpr int exit_refused = 1;
inline constexpr int exit_unreachable = 2;

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace hourglass::ctl
