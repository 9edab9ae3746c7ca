// Each script's encoder (scripts.hpp) against the contract its Lua header
// writes: as many KEYS and ARGV as the header names, for each of its forms,
// and per item of a batch as many more as the header's `[B + M i]` says. A
// position added to a script and not to its encoder (or the other way) fails
// here, without a broker. The header's grammar, as the scripts write it:
//   -- KEYS[3] stats_key ...          a position of every call
//   -- take: ARGV[8] count ...        a position of one form ('take') only;
//   --         ARGV[5] ...            continued on the lines indented below
//   -- KEYS[3 + 3i], ARGV[7 + 16(i-1)] ...   M more per item
//   -- KEYS[7], KEYS[8], ...          one more per item
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "scripts.hpp"

namespace hourglass::fleet::testing {
namespace {

using namespace std::chrono_literals;
using namespace hourglass::fleet::detail;

// What a script's header names for one form ("" the common one).
struct named {
  std::size_t keys = 0, args = 0;  // the last fixed position of each
  std::size_t keys_per_item = 0, args_per_item = 0;
};

named contract_of(std::string_view script, std::string_view form = "") {
  static const std::regex fixed(R"(^-- (KEYS|ARGV)\[(\d+)\] )");
  static const std::regex formed(R"(^-- '?(\w+)'?: (KEYS|ARGV)\[\d+\])");
  static const std::regex position(R"((KEYS|ARGV)\[(\d+)\])");
  static const std::regex per_item(R"((KEYS|ARGV)\[\d+ \+ (\d*)\(?i)");
  static const std::regex each(R"(^-- (KEYS|ARGV)\[\d+\], (KEYS|ARGV)\[\d+\], \.\.\.)");
  named n;
  const auto note = [&](const std::string& which, std::size_t at) {
    auto& last = which == "KEYS" ? n.keys : n.args;
    last = std::max(last, at);
  };
  std::istringstream text{std::string(script)};
  std::string line;
  std::string in_form;  // the form of the paragraph this line continues
  while (std::getline(text, line) && line.rfind("--", 0) == 0) {
    std::smatch m;
    const bool continued = line.rfind("--  ", 0) == 0;
    if (!continued) in_form.clear();
    if (std::regex_search(line, m, formed)) in_form = m[1];
    if (std::regex_search(line, m, each)) {
      (m[1] == "KEYS" ? n.keys_per_item : n.args_per_item) = 1;
    } else if (std::regex_search(line, m, per_item)) {
      const std::string mult = m[2];
      (m[1] == "KEYS" ? n.keys_per_item : n.args_per_item) = mult.empty() ? 1 : std::stoul(mult);
    } else if (std::regex_search(line, m, fixed)) {
      note(m[1], std::stoul(m[2]));
    } else if (!in_form.empty() && in_form == form) {
      for (auto it = std::sregex_iterator(line.begin(), line.end(), position); it != std::sregex_iterator(); ++it)
        note((*it)[1], std::stoul((*it)[2]));
    }
  }
  return n;
}

// `call` sends what its script's header names, with `items` batch items.
void expect_sends_its_contract(const script_call& call, std::string_view form, std::size_t items,
                               const std::string& what) {
  const named n = contract_of(call.script, form);
  ASSERT_GT(n.keys, 0U) << what << ": no KEYS[1] line in its script's header";
  EXPECT_EQ(call.keys.size(), n.keys + items * n.keys_per_item) << what;
  EXPECT_EQ(call.args.size(), n.args + items * n.args_per_item) << what;
}

const queue_keys k{"q"};

TEST(ScriptContracts, TheHeadersGrammarIsReadAsWritten) {
  const named start_given = contract_of(start_script);
  EXPECT_EQ(start_given.keys, 3U);
  EXPECT_EQ(start_given.args, 6U);
  EXPECT_EQ(start_given.keys_per_item, 1U);
  EXPECT_EQ(start_given.args_per_item, 3U);
  EXPECT_EQ(contract_of(start_script, "take").args, 10U);
  EXPECT_EQ(contract_of(enqueue_script).args_per_item, 16U);
  EXPECT_EQ(contract_of(enqueue_script).keys_per_item, 3U);
  EXPECT_EQ(contract_of(dead_script, "replay").args, 5U) << "its ARGV[5] is on a continued line";
  EXPECT_EQ(contract_of(dead_script, "delete").args, 2U);
  EXPECT_EQ(contract_of(renew_script).args_per_item, 1U);
}

TEST(ScriptContracts, EachEncoderSendsWhatItsScriptsHeaderNames) {
  queue_options o;
  job_spec a, b;
  a.handler = b.handler = "echo";
  b.parent = "p";
  const std::vector<enqueue_item> two{{"id-a", &a, 1s, duration::max()}, {"id-b", &b, duration::max(), 2s}};
  expect_sends_its_contract(encode_enqueue(k, o, false, two), "", 2, "enqueue");
  expect_sends_its_contract(encode_enqueue(k, o, true, {}), "", 0, "enqueue, no job");

  expect_sends_its_contract(encode_start(k, o, "c", 3, {{"1-0", "a", "t/1-0"}, {"2-0", "b", "t/2-0"}}), "", 2,
                            "start, given");
  expect_sends_its_contract(encode_take(k, o, "c", 3, 8, "t", true), "take", 0, "start, taken");

  // finish: KEYS per job; its ARGV per job vary by kind (the header lists them in prose)
  job_queue::outcome done{"id-a", 5ms, {{"state", "ok"}}};
  const script_call finish = encode_finish(k, 1h, "t", {done});
  const named f = contract_of(finish_script);
  EXPECT_EQ(finish.keys.size(), f.keys + f.keys_per_item);
  EXPECT_EQ(std::vector<std::string>(finish.args.begin() + static_cast<std::ptrdiff_t>(f.args), finish.args.end()),
            (std::vector<std::string>{"", "5000", "final", "2", "state", "ok"}));

  expect_sends_its_contract(encode_promote(k, 3ms, 1h, {"a", "b", "c"}), "", 3, "promote");
  expect_sends_its_contract(encode_cancel(k, "a", 1h, cancel_cause::requested), "", 0, "cancel");
  expect_sends_its_contract(encode_signal(k, "a", "approve", "yes", 1h), "", 0, "signal");
  const std::vector<job_queue::held_entry> held{{"1-0", "a"}, {"2-0", "b"}};
  expect_sends_its_contract(encode_renew(k, "c", {"t", 1}, 3s, 4, held), "", 2, "renew");
  expect_sends_its_contract(encode_hand_back(k, "c", "t", held), "", 2, "hand back");
  expect_sends_its_contract(encode_release(k, "c", "t"), "", 0, "release");
  expect_sends_its_contract(encode_shards(k, "", "q:1"), "", 0, "shards");
  expect_sends_its_contract(encode_queue(k, queue_op::pause), "", 0, "queue");
  expect_sends_its_contract(encode_list(k, "stream", "", 50, ""), "", 0, "list, an index");
  expect_sends_its_contract(encode_list(k, "", "", 50, "ok"), "scan", 0, "list, a scan");
  expect_sends_its_contract(encode_dead_replay(k, "a", 1s, 0ms, true), "replay", 0, "dead, replay");
  expect_sends_its_contract(encode_dead_delete(k, "a"), "delete", 0, "dead, delete");
  expect_sends_its_contract(encode_dead_purge(k, 10), "purge", 0, "dead, purge");
  expect_sends_its_contract(encode_schedule_look(k, "s"), "look", 0, "schedule, look");
  expect_sends_its_contract(encode_schedule_settle(k, "s", 1, 0, 0), "settle", 0, "schedule, settle");
  expect_sends_its_contract(encode_schedule_ran(k, "s", "a"), "ran", 0, "schedule, ran");
}

TEST(ScriptContracts, KeysAreTheQueuesOwnInOneHashSlot) {
  const script_call c = encode_cancel(k, "a", 1h, cancel_cause::requested);
  EXPECT_EQ(c.keys, (std::vector<std::string>{"hg:{q}:stream", "hg:{q}:job:a", "hg:{q}:delayed"}));
  EXPECT_EQ(encode_list(k, "delayed", "", 5, "").keys, std::vector<std::string>{"hg:{q}:delayed"});
  EXPECT_EQ(encode_list(k, "delayed", "", 5, "").args.front(), "zset");
  EXPECT_EQ(encode_list(k, "dead", "", 5, "").args.front(), "stream");
}

}  // namespace
}  // namespace hourglass::fleet::testing
