#include "hourglass/support/secret_file.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace hourglass::support {

std::string read_secret_file(const std::string& path, std::string_view option) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + std::string(option) + " " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const auto first = text.find_first_not_of(" \t\r\n");
  const auto last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) throw std::runtime_error(std::string(option) + " " + path + " is empty");
  return text.substr(first, last - first + 1);
}

}  // namespace hourglass::support
