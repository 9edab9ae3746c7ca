// hourglassd's configuration: a TOML file (--config, its text handed over
// from memory by a config_file_reader), then a command line of
// newline-separated arguments. Property: every input is options or a clear
// refusal (exit code and a message); nothing throws, nothing crashes. Periodic
// jobs ([[schedule]], --schedule) bring the cron reader in.
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "hourglass/server/config.hpp"

namespace {

void check(const std::vector<std::string>& args, std::string_view file = {}) {
  std::vector<const char*> argv{"hourglassd"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  const auto from_memory = [file](const std::string&) { return std::string(file); };
  static hourglass::server::command_line_parser parser;  // built once: CLI11's setup dominated each input
  const auto r = parser.parse(static_cast<int>(argv.size()), argv.data(), out, err, from_memory);
  if (!r.options) FUZZ_CHECK(r.exit_code != 0 ? !err.str().empty() : !out.str().empty());  // refused, or --help
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check({"--config", "fuzz.toml"}, text);
  // As a command line; no paths (a file argument could name /dev/zero), as
  // the files of --auth-token-file and the like are read from disk.
  if (text.find('/') != std::string_view::npos || text.find('\0') != std::string_view::npos) return 0;
  std::vector<std::string> args;
  std::size_t at = 0;
  while (at <= text.size() && args.size() < 32) {
    const auto nl = text.find('\n', at);
    args.emplace_back(text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at));
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  check(args);
  return 0;
}
