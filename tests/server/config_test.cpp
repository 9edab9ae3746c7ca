#include "hourglass/server/config.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace hourglass::server {
namespace {

using namespace std::chrono_literals;

struct parsed {
  command_line_result result;
  std::string out, err;
};

parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "hourglassd");
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out, err;
  parsed p{parse_command_line(static_cast<int>(argv.size()), argv.data(), out, err), {}, {}};
  p.out = out.str();
  p.err = err.str();
  return p;
}

class temp_file {
 public:
  explicit temp_file(const std::string& content) {
    char tmpl[] = "/tmp/hourglassd-config-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) throw std::runtime_error("mkstemp");
    ::close(fd);
    path_ = tmpl;
    std::ofstream(path_) << content;
  }
  ~temp_file() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Config, DefaultsFollowTheProtocol) {
  const auto p = parse({});
  ASSERT_TRUE(p.result.options) << p.err;
  const server_options& o = *p.result.options;
  EXPECT_EQ(o.listen, "127.0.0.1:8080");
  EXPECT_EQ(o.scheduling, policy::hourglass);
  EXPECT_GE(o.workers, 1u);
  EXPECT_FALSE(o.allow_unauthenticated);
  EXPECT_EQ(o.metrics_cache, 1s);
}

// /metrics is kept 1 s by default; 0s turns the cache off, from either source.
TEST(Config, MetricsCacheFromTheCommandLineAndTheFile) {
  const auto off = parse({"--metrics-cache", "0s"});
  ASSERT_TRUE(off.result.options) << off.err;
  EXPECT_EQ(off.result.options->metrics_cache, duration::zero());
  temp_file f("metrics-cache = \"5s\"\n");
  const auto file = parse({"--config", f.path()});
  ASSERT_TRUE(file.result.options) << file.err;
  EXPECT_EQ(file.result.options->metrics_cache, 5s);
  const auto bad = parse({"--metrics-cache", "-1s"});
  EXPECT_FALSE(bad.result.options);
  EXPECT_EQ(bad.result.exit_code, 2);
}

TEST(Config, EveryOptionFromTheCommandLine) {
  const auto p = parse({"--listen",
                        "127.0.0.1:9000",
                        "--workers",
                        "3",
                        "--queue-capacity",
                        "50",
                        "--default-budget",
                        "250ms",
                        "--max-budget",
                        "2s",
                        "--min-budget",
                        "5ms",
                        "--upstream",
                        "a=http://127.0.0.1:1",
                        "--upstream=b=http://localhost:2/prefix",
                        "--drain-timeout",
                        "1m",
                        "--max-body",
                        "4096",
                        "--policy",
                        "fifo",
                        "--call-reserve",
                        "10ms",
                        "--header-timeout",
                        "1s",
                        "--body-timeout",
                        "2s",
                        "--write-timeout",
                        "4s",
                        "--idle-timeout",
                        "3s",
                        "--max-connections",
                        "7",
                        "--metrics-cache",
                        "250ms",
                        "--async-ttl",
                        "30s",
                        "--async-max-jobs",
                        "9",
                        "--io-threads",
                        "1",
                        "--log-level",
                        "warn"});
  ASSERT_TRUE(p.result.options) << p.err;
  const server_options& o = *p.result.options;
  EXPECT_EQ(o.listen, "127.0.0.1:9000");
  EXPECT_EQ(o.workers, 3u);
  EXPECT_EQ(o.queue_capacity, 50u);
  EXPECT_EQ(o.default_budget, 250ms);
  EXPECT_EQ(o.max_budget, 2s);
  EXPECT_EQ(o.min_budget, 5ms);
  ASSERT_EQ(o.upstreams.size(), 2u);
  EXPECT_EQ(o.upstreams.at("a"), "http://127.0.0.1:1");
  EXPECT_EQ(o.upstreams.at("b"), "http://localhost:2/prefix");
  EXPECT_EQ(o.drain_timeout, 1min);
  EXPECT_EQ(o.max_body, 4096u);
  EXPECT_EQ(o.scheduling, policy::fifo);
  EXPECT_EQ(o.call_reserve, 10ms);
  EXPECT_EQ(o.header_timeout, 1s);
  EXPECT_EQ(o.body_timeout, 2s);
  EXPECT_EQ(o.write_timeout, 4s);
  EXPECT_EQ(o.idle_timeout, 3s);
  EXPECT_EQ(o.max_connections, 7u);
  EXPECT_EQ(o.metrics_cache, 250ms);
  EXPECT_EQ(o.async_ttl, 30s);
  EXPECT_EQ(o.async_max_jobs, 9u);
  EXPECT_EQ(o.io_threads, 1u);
  EXPECT_EQ(o.log_level, "warn");
}

TEST(Config, HelpShowsEveryOptionWithItsDefault) {
  const auto p = parse({"--help"});
  EXPECT_FALSE(p.result.options);
  EXPECT_EQ(p.result.exit_code, 0);
  for (const char* opt : {"--listen", "--workers", "--queue-capacity", "--default-budget", "--max-budget",
                          "--min-budget", "--upstream", "--drain-timeout", "--max-body", "--policy",
                          "--auth-token-file", "--allow-unauthenticated", "--metrics-cache", "--config"}) {
    EXPECT_NE(p.out.find(opt), std::string::npos) << opt;
  }
  for (const char* def : {"127.0.0.1:8080", "=10s", "=1m", "=1ms", "=1048576", "=hourglass", "=1024"}) {
    EXPECT_NE(p.out.find(def), std::string::npos) << def << "\n" << p.out;
  }
}

TEST(Config, BadValuesAreLoud) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--default-budget", "250"},  // no unit
           {"--default-budget", "1.5.2s"},
           {"--max-budget", "-1s"},
           {"--policy", "lifo"},
           {"--workers", "0"},
           {"--upstream", "nourl"},
           {"--upstream", "a=https://x:1"},  // no TLS
           {"--listen", "localhost:80"},     // an IP address is required
           {"--listen", "0.0.0.0:8080"},     // non-loopback without a token
           {"--default-budget", "2m", "--max-budget", "1m"},
           {"--no-such-option"},
       }) {
    const auto p = parse(args);
    EXPECT_FALSE(p.result.options) << args[0];
    EXPECT_EQ(p.result.exit_code, 2) << args[0];
    EXPECT_FALSE(p.err.empty()) << args[0];
  }
}

TEST(Config, FleetOptionsFollowTheProtocolFromTheCommandLineAndTheFile) {
  const auto d = parse({});
  ASSERT_TRUE(d.result.options) << d.err;
  EXPECT_EQ(d.result.options->broker, "") << "memory mode unless --broker";
  EXPECT_EQ(d.result.options->queue, "default");
  EXPECT_EQ(d.result.options->consumer, "") << "<hostname>:<port> once the port is known";
  EXPECT_EQ(d.result.options->lease, 10s);
  EXPECT_EQ(d.result.options->max_deliveries, 3u);
  EXPECT_EQ(d.result.options->prefetch, 0u) << "exact admission unless asked";
  EXPECT_FALSE(d.result.options->produce_only);
  EXPECT_EQ(d.result.options->result_ttl, 24h);
  EXPECT_EQ(d.result.options->idempotency_ttl, 24h);

  const auto c = parse({"--broker", "redis://10.0.0.5:6380/2", "--queue", "mail", "--consumer", "host-a:1", "--lease",
                        "3s", "--max-deliveries", "5", "--prefetch", "16", "--produce-only", "--result-ttl", "1h",
                        "--idempotency-ttl", "2h", "--broker-password-file", "/etc/hourglassd/redis"});
  ASSERT_TRUE(c.result.options) << c.err;
  const server_options& o = *c.result.options;
  EXPECT_EQ(o.broker, "redis://10.0.0.5:6380/2");
  EXPECT_EQ(o.queue, "mail");
  EXPECT_EQ(o.consumer, "host-a:1");
  EXPECT_EQ(o.lease, 3s);
  EXPECT_EQ(o.max_deliveries, 5u);
  EXPECT_EQ(o.prefetch, 16u);
  EXPECT_TRUE(o.produce_only);
  EXPECT_EQ(o.result_ttl, 1h);
  EXPECT_EQ(o.idempotency_ttl, 2h);
  EXPECT_EQ(o.broker_password_file, "/etc/hourglassd/redis");
  EXPECT_EQ(o.broker_replicas, 0u) << "a 202 once the master holds it, unless asked";

  const auto cl = parse({"--broker", "redis+cluster://10.0.0.5:7000,10.0.0.6:7000", "--broker-replicas", "1",
                         "--broker-replica-timeout", "250ms", "--queue-shards", "4"});
  ASSERT_TRUE(cl.result.options) << cl.err;
  EXPECT_EQ(cl.result.options->broker, "redis+cluster://10.0.0.5:7000,10.0.0.6:7000");
  EXPECT_EQ(cl.result.options->broker_replicas, 1u);
  EXPECT_EQ(cl.result.options->broker_replica_timeout, 250ms);
  EXPECT_EQ(cl.result.options->queue_shards, 4u);
  EXPECT_EQ(o.queue_shards, 1u) << "one shard unless asked";

  temp_file f(R"(
broker = "redis://127.0.0.1:6390"
queue = "q1"
consumer = "b"
lease = "2s"
max-deliveries = 4
result-ttl = "10m"
idempotency-ttl = "20m"
broker-password-file = "/run/secret"
)");
  const auto t = parse({"--config", f.path(), "--lease", "4s"});
  ASSERT_TRUE(t.result.options) << t.err;
  EXPECT_EQ(t.result.options->broker, "redis://127.0.0.1:6390");
  EXPECT_EQ(t.result.options->queue, "q1");
  EXPECT_EQ(t.result.options->consumer, "b");
  EXPECT_EQ(t.result.options->lease, 4s) << "the command line wins";
  EXPECT_EQ(t.result.options->max_deliveries, 4u);
  EXPECT_EQ(t.result.options->result_ttl, 10min);
  EXPECT_EQ(t.result.options->idempotency_ttl, 20min);
  EXPECT_EQ(t.result.options->broker_password_file, "/run/secret");
}

TEST(Config, BadFleetValuesAreLoud) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--broker", "http://127.0.0.1:6379"},
           {"--broker", "redis://127.0.0.1:6379/16"},
           {"--broker", "redis://user:pw@127.0.0.1:6379"},  // a secret belongs in --broker-password-file
           {"--broker", "redis://127.0.0.1:6379", "--lease", "10ms"},
           {"--broker", "redis://127.0.0.1:6379", "--max-deliveries", "0"},
           {"--broker", "redis://127.0.0.1:6379", "--result-ttl", "0s"},
           {"--broker", "redis://127.0.0.1:6379", "--queue", "a}b"},
           {"--broker", "redis+cluster://127.0.0.1:7000/1"},  // a cluster has only database 0
           {"--broker", "redis+cluster://127.0.0.1:7000", "--broker-replica-timeout", "0s"},
           {"--broker", "redis://127.0.0.1:6379", "--broker-replicas", "17"},
           {"--broker", "redis://127.0.0.1:6379", "--queue-shards", "0"},
           {"--broker", "redis://127.0.0.1:6379", "--queue-shards", "65"},
           {"--queue-shards", "2"},  // in memory there is no queue to shard
           {"--produce-only"},       // in memory a daemon runs what it takes
       }) {
    const auto p = parse(args);
    EXPECT_FALSE(p.result.options) << args.back();
    EXPECT_EQ(p.result.exit_code, 2) << args.back();
    EXPECT_FALSE(p.err.empty()) << args.back();
  }
}

TEST(Config, NonLoopbackIsAllowedWhenAskedFor) {
  EXPECT_TRUE(parse({"--listen", "0.0.0.0:8080", "--allow-unauthenticated"}).result.options);
  EXPECT_TRUE(parse({"--listen", "0.0.0.0:8080", "--auth-token-file", "/etc/hourglassd/token"}).result.options);
  EXPECT_TRUE(parse({"--listen", "[::1]:8080"}).result.options);
}

TEST(Config, TomlFileTakesTheSameKeysAndTheCommandLineWins) {
  temp_file f(R"(
listen = "127.0.0.1:9100"
workers = 5
default-budget = "750ms"
policy = "fifo"
allow-unauthenticated = false
upstream = ["a=http://127.0.0.1:1", "b=http://127.0.0.1:2"]
)");
  const auto p = parse({"--config", f.path(), "--workers", "2"});
  ASSERT_TRUE(p.result.options) << p.err;
  const server_options& o = *p.result.options;
  EXPECT_EQ(o.listen, "127.0.0.1:9100");
  EXPECT_EQ(o.workers, 2u);
  EXPECT_EQ(o.default_budget, 750ms);
  EXPECT_EQ(o.scheduling, policy::fifo);
  EXPECT_EQ(o.upstreams.size(), 2u);
}

TEST(Config, UpstreamsMayBeATomlTable) {
  temp_file f("[upstream]\nsearch = \"http://127.0.0.1:8081\"\n");
  const auto p = parse({"--config", f.path()});
  ASSERT_TRUE(p.result.options) << p.err;
  EXPECT_EQ(p.result.options->upstreams.at("search"), "http://127.0.0.1:8081");
}

TEST(Config, UnknownKeysAndBrokenFilesAreErrors) {
  temp_file unknown("listn = \"127.0.0.1:1\"\n");
  auto p = parse({"--config", unknown.path()});
  EXPECT_FALSE(p.result.options);
  EXPECT_NE(p.err.find("listn"), std::string::npos) << p.err;
  temp_file broken("listen = \n");
  p = parse({"--config", broken.path()});
  EXPECT_FALSE(p.result.options);
  EXPECT_EQ(p.result.exit_code, 2);
  p = parse({"--config", "/nonexistent/hourglassd.toml"});
  EXPECT_FALSE(p.result.options);
}

// The file is read into server_options directly, so its values are typed:
// counts are integers, flags booleans, durations strings in the one grammar.
TEST(Config, WrongTypesAndRangesInTheFileAreErrorsNamingTheKey) {
  for (const char* content : {"workers = \"5\"\n", "workers = 0\n", "workers = 5000\n", "workers = -1\n",
                              "default-budget = 5\n", "default-budget = \"5\"\n", "allow-unauthenticated = \"yes\"\n",
                              "policy = \"lifo\"\n", "log-level = \"loud\"\n", "listen = 8080\n", "upstream = [1]\n",
                              "upstream = 3\n", "config = \"/etc/other.toml\"\n"}) {
    temp_file f(content);
    const auto p = parse({"--config", f.path()});
    EXPECT_FALSE(p.result.options) << content;
    EXPECT_EQ(p.result.exit_code, 2) << content;
    const std::string key(content, std::string_view(content).find(' '));
    EXPECT_NE(p.err.find(key), std::string::npos) << content << " -> " << p.err;
    EXPECT_NE(p.err.find(f.path()), std::string::npos) << content << " -> " << p.err;
  }
}

TEST(Config, EveryKindOfKeyFromTheFile) {
  temp_file f(R"(
io-threads = 3
max-body = 0
min-budget = "2ms"
async-ttl = "1.5s"
allow-unauthenticated = true
listen = "0.0.0.0:9100"
log-level = "warn"
auth-token-file = "/etc/hourglassd/token"
[upstream]
a = "http://127.0.0.1:1"
)");
  const auto p = parse({"--config", f.path()});
  ASSERT_TRUE(p.result.options) << p.err;
  const server_options& o = *p.result.options;
  EXPECT_EQ(o.io_threads, 3u);
  EXPECT_EQ(o.max_body, 0u);
  EXPECT_EQ(o.min_budget, 2ms);
  EXPECT_EQ(o.async_ttl, 1500ms);
  EXPECT_TRUE(o.allow_unauthenticated);
  EXPECT_EQ(o.listen, "0.0.0.0:9100");
  EXPECT_EQ(o.log_level, "warn");
  EXPECT_EQ(o.auth_token_file, "/etc/hourglassd/token");
  EXPECT_EQ(o.upstreams.at("a"), "http://127.0.0.1:1");
}

// Each key the command line sets wins over the file; upstreams merge, the
// command line's winning per name.
TEST(Config, CommandLineWinsKeyByKeyAndUpstreamsMerge) {
  temp_file f(R"(
default-budget = "750ms"
max-budget = "20s"
policy = "fifo"
upstream = ["a=http://127.0.0.1:1", "b=http://127.0.0.1:2"]
)");
  const auto p = parse({"--default-budget", "2s", "--config", f.path(), "--policy", "hourglass", "--upstream",
                        "b=http://127.0.0.1:3", "--upstream", "c=http://127.0.0.1:4"});
  ASSERT_TRUE(p.result.options) << p.err;
  const server_options& o = *p.result.options;
  EXPECT_EQ(o.default_budget, 2s);
  EXPECT_EQ(o.max_budget, 20s);
  EXPECT_EQ(o.scheduling, policy::hourglass);
  ASSERT_EQ(o.upstreams.size(), 3u);
  EXPECT_EQ(o.upstreams.at("a"), "http://127.0.0.1:1");
  EXPECT_EQ(o.upstreams.at("b"), "http://127.0.0.1:3");
  EXPECT_EQ(o.upstreams.at("c"), "http://127.0.0.1:4");
}

TEST(Config, BadDurationNamesTheOptionAndTheGrammar) {
  const auto p = parse({"--drain-timeout", "10"});
  EXPECT_FALSE(p.result.options);
  EXPECT_EQ(p.result.exit_code, 2);
  EXPECT_NE(p.err.find("--drain-timeout"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("10"), std::string::npos) << p.err;
}

// The file's text can come from somewhere other than the disk (the fuzzer
// hands it over from memory); the reader is asked for the path given.
TEST(Config, TheFileIsReadThroughTheReaderGiven) {
  std::vector<std::string> asked;
  const auto from_memory = [&asked](const std::string& path) {
    asked.push_back(path);
    return std::string("workers = 3\ndefault-budget = \"750ms\"\n");
  };
  const char* argv[] = {"hourglassd", "--config", "in-memory.toml"};
  std::ostringstream out, err;
  const auto r = parse_command_line(3, argv, out, err, from_memory);
  ASSERT_TRUE(r.options) << err.str();
  EXPECT_EQ(r.options->workers, 3u);
  EXPECT_EQ(r.options->default_budget, 750ms);
  EXPECT_EQ(asked, std::vector<std::string>{"in-memory.toml"});
}

// A parser built once and used again starts each parse from the defaults:
// nothing of the last command line or file is left behind.
TEST(Config, AReusedParserForgetsTheLastParse) {
  command_line_parser parser;
  std::ostringstream out, err;
  const auto file = [](const std::string&) { return std::string("upstream = [\"a=http://127.0.0.1:1\"]\n"); };
  const char* first[] = {"hourglassd", "--workers", "7", "--policy", "fifo", "--allow-unauthenticated",
                         "--config",   "f.toml"};
  const auto a = parser.parse(8, first, out, err, file);
  ASSERT_TRUE(a.options) << err.str();
  EXPECT_EQ(a.options->workers, 7u);
  EXPECT_EQ(a.options->upstreams.size(), 1u);

  const char* second[] = {"hourglassd"};
  const auto b = parser.parse(1, second, out, err, file);
  ASSERT_TRUE(b.options) << err.str();
  const server_options defaults = *parse({}).result.options;
  EXPECT_EQ(b.options->workers, defaults.workers);
  EXPECT_EQ(b.options->scheduling, policy::hourglass);
  EXPECT_FALSE(b.options->allow_unauthenticated);
  EXPECT_TRUE(b.options->upstreams.empty());

  const char* bad[] = {"hourglassd", "--workers", "0"};
  EXPECT_FALSE(parser.parse(3, bad, out, err, file).options);
  const auto c = parser.parse(1, second, out, err, file);
  ASSERT_TRUE(c.options) << err.str();
  EXPECT_EQ(c.options->workers, defaults.workers);
}

}  // namespace
}  // namespace hourglass::server
