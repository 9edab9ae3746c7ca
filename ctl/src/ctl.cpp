#include "hourglass/ctl/ctl.hpp"

#include <CLI/CLI.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/encode.hpp>
#include <boost/url/rfc/unreserved_chars.hpp>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <thread>

#include "hourglass/budget_codec.hpp"
#include "hourglass/ctl/api_client.hpp"
#include "hourglass/ctl/render.hpp"
#include "hourglass/support/cli.hpp"
#include "hourglass/support/secret_file.hpp"

namespace hourglass::ctl {

namespace json = boost::json;

namespace {

std::string encoded(std::string_view s) { return boost::urls::encode(s, boost::urls::unreserved_chars); }

struct settings {
  api_target target;
  std::string token_file;
  std::string admin_token_file;
  bool as_json = false;
  duration timeout = std::chrono::seconds(10);
};

// One command's work: asks the daemon, prints the answer; its exit code.
using action = std::function<int(api_client&, std::ostream&, std::ostream&)>;

// The answer as the API wrote it (--json) or through `render`; a refusal on `err`.
int show(const api_reply& r, const settings& s, std::ostream& out, std::ostream& err, std::string_view what,
         const std::function<std::string(const json::value&)>& render) {
  if (r.status < 200 || r.status >= 300) {
    err << "hourglass: " << what << ": " << refusal_text(r.status, r.body) << '\n';
    return exit_refused;
  }
  if (s.as_json) {
    out << r.body << (r.body.empty() || r.body.back() != '\n' ? "\n" : "");
    return 0;
  }
  boost::system::error_code ec;
  const json::value v = json::parse(r.body, ec);
  if (ec) throw std::runtime_error(std::string(what) + ": the daemon answered something that is not JSON");
  out << render(v);
  return 0;
}

// GET /v1/jobs page after page until `limit` jobs (0: all) or the walk's end.
int walk_jobs(api_client& c, const settings& s, std::ostream& out, std::ostream& err, const std::string& state,
              const std::string& handler, std::size_t limit) {
  std::vector<json::object> jobs;
  json::value cursor = nullptr;
  do {
    const std::size_t page = limit == 0 ? 1000 : std::min<std::size_t>(1000, limit - jobs.size());
    std::string target = "/v1/jobs?limit=" + std::to_string(page);
    if (!state.empty()) target += "&state=" + encoded(state);
    if (!handler.empty()) target += "&handler=" + encoded(handler);
    if (cursor.is_string()) target += "&cursor=" + encoded(cursor.get_string());
    api_reply r = c.call("GET", target);
    // A fleet daemon paces listings that read the whole broker (429, a
    // second apart): a long walk waits for its turn rather than failing.
    for (int waits = 0; r.status == 429 && waits < 60; ++waits) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      r = c.call("GET", target);
    }
    if (r.status != 200) {
      err << "hourglass: jobs: " << refusal_text(r.status, r.body) << '\n';
      return exit_refused;
    }
    boost::system::error_code ec;
    const json::value v = json::parse(r.body, ec);
    if (ec || !v.is_object() || !v.get_object().contains("jobs")) {
      throw std::runtime_error("jobs: the daemon answered something that is not a page of jobs");
    }
    for (const auto& j : v.at("jobs").as_array()) {
      if (j.is_object()) jobs.push_back(j.get_object());
    }
    json::value next = v.get_object().contains("next_cursor") ? v.at("next_cursor") : json::value(nullptr);
    if (next.is_string() && cursor.is_string() && next.get_string() == cursor.get_string()) {
      throw std::runtime_error("jobs: the daemon answered the same cursor twice");  // never loop
    }
    cursor = std::move(next);
  } while (cursor.is_string() && (limit == 0 || jobs.size() < limit));
  if (s.as_json) {
    json::array list;
    for (auto& j : jobs) list.emplace_back(std::move(j));
    out << json::serialize(json::object{{"jobs", std::move(list)}, {"next_cursor", cursor}}) << '\n';
    return 0;
  }
  out << jobs_text(jobs);
  if (cursor.is_string()) out << "(more: --limit N or --all)\n";
  return 0;
}

}  // namespace

int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  CLI::App app("hourglass: see and act on a hourglassd's queues and jobs (docs/reference/cli.md)", "hourglass");
  app.require_subcommand(1, 1);
  settings s;
  app.add_option("--url", s.target.url, "the daemon")->envname("HOURGLASS_URL")->capture_default_str();
  app.add_option("--token-file", s.token_file, "a file holding the daemon's --auth-token-file token")
      ->envname("HOURGLASS_TOKEN_FILE");
  app.add_option("--admin-token-file", s.admin_token_file, "a file holding its --admin-token-file token")
      ->envname("HOURGLASS_ADMIN_TOKEN_FILE");
  app.add_flag("--json", s.as_json, "print the API's JSON as it is, for scripts");
  cli::add_duration(app, "--timeout", s.timeout, "each request's limit");

  action act;
  const auto simple = [&](std::string method, std::function<std::string()> target, bool admin,
                          std::function<std::string(const json::value&)> render,
                          std::function<std::vector<std::pair<std::string, std::string>>()> headers = {}) {
    return [=, &s](api_client& c, std::ostream& o, std::ostream& e) {
      const std::string t = target();
      const api_reply r = c.call(method, t, admin, headers ? headers() : decltype(headers())());
      return show(r, s, o, e, method + " " + t, render);
    };
  };
  const auto object_text = [](const json::value& v) { return v.is_object() ? job_text(v.get_object()) : ""; };

  std::string one_queue;  // queues: "" lists them all
  auto* queues = app.add_subcommand("queues", "each queue: counts, oldest job, predicted wait, consumers");
  queues->add_option("name", one_queue, "one queue");
  queues->callback([&] {
    act = simple(
        "GET", [&] { return "/v1/queues" + (one_queue.empty() ? "" : "/" + encoded(one_queue)); }, false,
        [](const json::value& v) { return queues_text(v); });
  });

  std::string state, handler;
  std::size_t limit = 100;
  bool all = false;
  auto* jobs = app.add_subcommand("jobs", "jobs by state, walked page by page (the API's order)");
  jobs->add_option("--state", state,
                   "queued, running, scheduled, retrying, dead, finished, or a final state (ok, error, ...)");
  jobs->add_option("--handler", handler, "one handler's jobs");
  jobs->add_option("--limit", limit, "at most this many")->check(CLI::Range(1, 100'000))->capture_default_str();
  jobs->add_flag("--all", all, "every one, however many");
  jobs->callback([&] {
    act = [&](api_client& c, std::ostream& o, std::ostream& e) {
      return walk_jobs(c, s, o, e, state, handler, all ? 0 : limit);
    };
  });

  std::string id;
  auto* job = app.add_subcommand("job", "one job: its fields, attempts and result");
  job->add_option("id", id, "the job id")->required();
  job->callback([&] {
    act = simple(
        "GET", [&] { return "/v1/jobs/" + encoded(id); }, false, object_text);
  });

  auto* cancel = app.add_subcommand("cancel", "cancel a job (queued, scheduled or running)");
  cancel->add_option("id", id, "the job id")->required();
  cancel->callback([&] {
    act = simple(
        "DELETE", [&] { return "/v1/jobs/" + encoded(id); }, false, object_text);
  });

  duration freshness{};
  auto* replay = app.add_subcommand("replay", "admin: admit a dead job again, with a new freshness");
  replay->add_option("id", id, "the dead job's id")->required();
  cli::add_duration(*replay, "--freshness", freshness, "how long it may wait to start (default: the daemon's)")
      ->default_str("");
  replay->callback([&] {
    act = simple(
        "POST", [&] { return "/v1/jobs/" + encoded(id) + "/replay"; }, true, object_text,
        [&]() -> std::vector<std::pair<std::string, std::string>> {
          if (freshness <= duration::zero()) return {};
          return {{"Job-Freshness", format_grpc_timeout(freshness)}};
        });
  });

  std::string queue_name = "default";  // the admin commands' queue
  for (const char* verb : {"pause", "resume"}) {
    auto* sub = app.add_subcommand(verb, std::string("admin: ") + verb + " a queue across the fleet");
    sub->add_option("queue", queue_name, "the queue")->capture_default_str();
    sub->callback([&, verb = std::string(verb)] {
      act = simple(
          "POST", [&, verb] { return "/v1/queues/" + encoded(queue_name) + "/" + verb; }, true,
          [](const json::value& v) { return queues_text(v); });
    });
  }

  auto* del = app.add_subcommand("delete", "admin: delete a dead job");
  del->add_option("id", id, "the dead job's id")->required();
  del->add_option("--queue", queue_name, "its queue")->capture_default_str();
  del->callback([&] {
    act = simple(
        "DELETE", [&] { return "/v1/queues/" + encoded(queue_name) + "/dead/" + encoded(id); }, true,
        [](const json::value&) { return std::string("deleted\n"); });
  });

  std::size_t purge_limit = 100;
  bool yes = false;
  auto* replay_dead = app.add_subcommand("replay-dead", "admin: admit the oldest dead jobs again, oldest first");
  replay_dead->add_option("--queue", queue_name, "the queue")->capture_default_str();
  replay_dead->add_option("--limit", purge_limit, "at most this many")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cli::add_duration(*replay_dead, "--freshness", freshness, "how long each may wait to start (default: the daemon's)")
      ->default_str("");
  replay_dead->add_flag("--yes", yes, "required: it queues many jobs at once")->required();
  replay_dead->callback([&] {
    act = simple(
        "POST",
        [&] {
          return "/v1/queues/" + encoded(queue_name) + "/dead/replay?limit=" + std::to_string(purge_limit) +
                 "&confirm=yes";
        },
        true,
        [](const json::value& v) {
          const auto& o = v.as_object();
          return "replayed " + json::serialize(o.at("replayed")) + " dead jobs" +
                 (o.at("refused").as_bool() ? "; then one was refused at admission (it could not start in time)" : "") +
                 "; " + json::serialize(o.at("left")) + " left\n";
        },
        [&]() -> std::vector<std::pair<std::string, std::string>> {
          if (freshness <= duration::zero()) return {};
          return {{"Job-Freshness", format_grpc_timeout(freshness)}};
        });
  });
  auto* purge = app.add_subcommand("purge", "admin: delete the oldest dead jobs");
  purge->add_option("--queue", queue_name, "the queue")->capture_default_str();
  purge->add_option("--limit", purge_limit, "at most this many")->check(CLI::Range(1, 1000))->capture_default_str();
  purge->add_flag("--yes", yes, "required: the deletion cannot be undone")->required();
  purge->callback([&] {
    act = simple(
        "DELETE",
        [&] {
          return "/v1/queues/" + encoded(queue_name) + "/dead?limit=" + std::to_string(purge_limit) + "&confirm=yes";
        },
        true,
        [](const json::value& v) {
          const auto& o = v.as_object();
          return "purged " + json::serialize(o.at("purged")) + " dead jobs; " + json::serialize(o.at("left")) +
                 " left\n";
        });
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }
  try {
    s.target.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(s.timeout);
    if (!s.token_file.empty()) s.target.token = support::read_secret_file(s.token_file, "--token-file");
    if (!s.admin_token_file.empty()) {
      s.target.admin_token = support::read_secret_file(s.admin_token_file, "--admin-token-file");
    }
    api_client client(s.target);
    return act(client, out, err);
  } catch (const std::exception& e) {
    err << "hourglass: " << e.what() << '\n';
    return exit_unreachable;
  }
}

}  // namespace hourglass::ctl
