// Periodic jobs in the daemon's configuration: --schedule and [[schedule]],
// and each wrong one refused with a message naming it.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "hourglass/server/config.hpp"

namespace hourglass::server {
namespace {

using namespace std::chrono_literals;

struct schedule_parse {
  command_line_result result;
  std::string err;
};

schedule_parse parse_schedules(std::vector<std::string> args, const std::string& file = "") {
  std::string path;
  if (!file.empty()) {
    char tmpl[] = "/tmp/hourglassd-schedules-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ::close(fd);
    path = tmpl;
    std::ofstream(path) << file;
    args.insert(args.begin(), {"--config", path});
  }
  args.insert(args.begin(), "hourglassd");
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  schedule_parse p{parse_command_line(static_cast<int>(argv.size()), argv.data(), out, err), err.str()};
  if (!path.empty()) std::remove(path.c_str());
  return p;
}

TEST(ScheduleConfig, FromTheFileAndTheCommandLineBothKept) {
  const auto p = parse_schedules({"--schedule", "tick|@every 30s|echo|hello|world"}, R"(
[[schedule]]
name = "nightly"
cron = "0 3 * * *"
zone = "Europe/Berlin"
handler = "echo"
body = "{}"
content_type = "application/json"
freshness = "10m"
overlap = "allow"
)");
  ASSERT_TRUE(p.result.options) << p.err;
  const auto& s = p.result.options->schedules;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "nightly");
  EXPECT_EQ(s[0].cron, "0 3 * * *");
  EXPECT_EQ(s[0].zone, "Europe/Berlin");
  EXPECT_EQ(s[0].content_type, "application/json");
  EXPECT_EQ(s[0].freshness, std::optional<duration>(10min));
  EXPECT_TRUE(s[0].allow_overlap);
  EXPECT_EQ(s[1].name, "tick");
  EXPECT_EQ(s[1].cron, "@every 30s");
  EXPECT_EQ(s[1].handler, "echo");
  EXPECT_EQ(s[1].body, "hello|world") << "the body may hold '|'";
  EXPECT_EQ(s[1].zone, "UTC");
  EXPECT_FALSE(s[1].allow_overlap);
}

TEST(ScheduleConfig, AWrongScheduleIsRefusedNamingIt) {
  struct row {
    std::vector<std::string> args;
    std::string file, says;
  };
  const std::vector<row> rows{
      {{"--schedule", "tick|@every 30s"}, "", "NAME|CRON|HANDLER"},
      {{"--schedule", "tick|61 * * * *|echo"}, "", "schedule 'tick': minute"},
      {{"--schedule", "tick|@daily|echo", "--schedule", "tick|@hourly|echo"}, "", "two schedules are named 'tick'"},
      {{"--schedule", "a b|@daily|echo"}, "", "schedule name 'a b'"},
      {{}, "[[schedule]]\nname = \"x\"\ncron = \"@daily\"\n", "needs handler"},
      {{}, "[[schedule]]\nname = \"x\"\ncron = \"@daily\"\nhandler = \"echo\"\nzone = \"Mars/Base\"\n", "Mars/Base"},
      {{}, "[[schedule]]\nname = \"x\"\ncron = \"@daily\"\nhandler = \"echo\"\noverlap = \"queue\"\n", "overlap"},
      {{},
       "[[schedule]]\nname = \"x\"\ncron = \"@daily\"\nhandler = \"echo\"\ncolor = \"red\"\n",
       "unknown key 'color'"},
      {{}, "schedule = \"x|@daily|echo\"\n", "an array of tables"},
  };
  for (const row& r : rows) {
    SCOPED_TRACE(r.says);
    const auto p = parse_schedules(r.args, r.file);
    EXPECT_FALSE(p.result.options);
    EXPECT_EQ(p.result.exit_code, 2);
    EXPECT_NE(p.err.find(r.says), std::string::npos) << p.err;
  }
}

TEST(RetryConfig, HandlersPoliciesFromTheFileAndTheCommandLine) {
  const auto p = parse_schedules({"--retry", "call=5,200ms,30s", "--retry", "echo=3"},
                                 "[retry]\nsleep = \"2,1s\"\ncall = \"9\"\nstream = \"4,2s,2s;jitter=none\"\n");
  ASSERT_TRUE(p.result.options) << p.err;
  const auto& r = p.result.options->handler_retries;
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r.at("call").max_attempts, 5) << "the command line wins";
  EXPECT_EQ(r.at("call").base, 200ms);
  EXPECT_EQ(r.at("call").cap, 30s);
  EXPECT_EQ(r.at("echo").max_attempts, 3);
  EXPECT_EQ(r.at("echo").base, 1s) << "the default base";
  EXPECT_EQ(r.at("sleep").base, 1s);
  EXPECT_EQ(r.at("sleep").cap, 5min);
  EXPECT_TRUE(r.at("sleep").jitter) << "full jitter by default";
  EXPECT_FALSE(r.at("stream").jitter) << "a fixed 2 s backoff";
  EXPECT_EQ(r.at("stream").base, 2s);
  const auto flag = parse_schedules({"--retry", "call=3,1s;jitter=none"});
  ASSERT_TRUE(flag.result.options) << flag.err;
  EXPECT_FALSE(flag.result.options->handler_retries.at("call").jitter);
  EXPECT_EQ(flag.result.options->handler_retries.at("call").cap, 5min);
  for (const char* bad : {"call", "call=", "call=many", "call=0", "call=101", "call=3,soon", "call=3,2s,1s",
                          "call=3,1s,2s,4s", "=3", "a b=3", "call=3;jitter=some", "call=3;", "call=3,1s;none"}) {
    SCOPED_TRACE(bad);
    const auto refused = parse_schedules({"--retry", bad});
    EXPECT_FALSE(refused.result.options);
    EXPECT_EQ(refused.result.exit_code, 2);
    EXPECT_NE(refused.err.find("retry"), std::string::npos) << refused.err;
  }
}

}  // namespace
}  // namespace hourglass::server
