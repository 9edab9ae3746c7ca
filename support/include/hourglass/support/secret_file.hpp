// A secret kept in a file (hourglassd's --auth-token-file and
// --broker-password-file, the hourglass command's --token-file), so it is
// never on a command line for `ps` to show.
#pragma once

#include <string>
#include <string_view>

namespace hourglass::support {

// The file's text without surrounding whitespace (an editor's newline).
// Throws std::runtime_error naming `option` when it cannot be read or is empty.
std::string read_secret_file(const std::string& path, std::string_view option);

}  // namespace hourglass::support
