// hourglassd's command line (CLI11) and config file (TOML, toml++).
//
// Every option of server_options is a command-line flag; `--config FILE`
// reads the same keys, without the dashes, from a TOML file straight into the
// same server_options (toml++; no detour through argv). The command line wins
// over the file, key by key; upstreams from both are merged, the command
// line's winning per name. Durations are written like "250ms", "2s", "1m"
// (parse_human_duration: loud on anything else), in the file as strings.
// Example file:
//
//   listen = "127.0.0.1:8080"
//   workers = 8
//   default-budget = "2s"
//   upstream = ["search=http://127.0.0.1:8081"]   # or a table: [upstream] search = "http://..."
//
// An unknown key in the file is an error, as is a value of the wrong type
// (a count must be a TOML integer, a flag a boolean, anything else a string)
// or out of the range the flag accepts.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

#include "hourglass/server/options.hpp"

namespace hourglass::server {

struct command_line_result {
  std::optional<server_options> options;  // set: run with these (already validated)
  int exit_code = 0;                      // unset options: exit with this (0 after --help)
};

// Reads the text of the --config file. The default reads it from disk
// (std::invalid_argument naming the path if it cannot); the fuzzer passes
// one that hands back text from memory.
using config_file_reader = std::function<std::string(const std::string& path)>;
std::string read_config_file(const std::string& path);

// Parses argv; writes --help to `out` and errors to `err`.
command_line_result parse_command_line(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                                       const config_file_reader& read_file = read_config_file);

// The same, with the option table built once for many parses (each starts
// from default options). One thread at a time.
class command_line_parser {
 public:
  command_line_parser();
  ~command_line_parser();
  command_line_parser(const command_line_parser&) = delete;
  command_line_parser& operator=(const command_line_parser&) = delete;

  command_line_result parse(int argc, const char* const* argv, std::ostream& out, std::ostream& err,
                            const config_file_reader& read_file = read_config_file);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hourglass::server
