// CLI11 glue shared by the command lines of hourglassd and hourglass-bench.
//
// Durations have one grammar in this project, parse_human_duration in
// budget_codec.hpp ("250ms", "2s", "1m"); this header only adapts it to CLI11,
// so that an option is bound straight to a `duration` and a typo is a CLI11
// ValidationError carrying the grammar's own message.
//
// Header-only, for programs (CLI11 is theirs to find); the hourglass library
// itself never includes it.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "hourglass/budget_codec.hpp"
#include "hourglass/time.hpp"

namespace hourglass::cli {

// A CLI11 transform: "250ms" becomes its count of nanoseconds, which CLI11
// then converts into the option's `duration` (see add_duration). Anything
// outside the grammar is refused with parse_human_duration's message.
inline CLI::Validator human_duration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const duration_parse p = parse_human_duration(text);
        if (!p.value) return p.error;
        text = std::to_string(p.value->count());
        return {};
      },
      "", "DUR");
}

// `name DUR`, stored into `target` when given. --help shows target's value at
// this call in the same grammar ("10s", not nanoseconds); pass
// ->default_str("") on the result when that value only means "unset".
inline CLI::Option* add_duration(CLI::App& app, const std::string& name, duration& target, const std::string& help) {
  return app.add_option<duration, duration::rep>(name, target, help)
      ->transform(human_duration())
      ->type_name("DUR")
      ->default_str(format_human_duration(target));
}

}  // namespace hourglass::cli
