// list.lua on a real redis-server: a walk along the stream or the delayed
// set lists each job that stays for the whole walk exactly once, whatever
// is added or removed between its pages; ties in due time are ordered by id.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "job_hash.hpp"
#include "lua_script_fixture.hpp"

namespace hourglass::fleet::testing {
namespace {

struct ListScript : LuaScript {
  struct page {
    std::string next;
    std::vector<std::string> ids;
  };
  page list(const std::string& key, const std::string& kind, const std::string& cursor, int count,
            const std::string& filter = "") {
    std::vector<std::string> args{kind, cursor, std::to_string(count)};
    if (!filter.empty()) args.push_back(filter);
    const redis_reply r = eval(detail::list_script, {key}, args);
    page p;
    if (!r.is_array() || r.elements.empty()) {
      ADD_FAILURE() << "list replied " << r.str;
      return p;
    }
    p.next = r.elements[0].str;
    for (std::size_t i = 1; i < r.elements.size(); ++i) p.ids.push_back(r.elements[i].str);
    return p;
  }
};

TEST_F(ListScript, AStreamWalkListsEachJobThatStaysOnceWhileOthersComeAndGo) {
  std::vector<std::string> ids, entries;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(new_job_id());
    entries.push_back(enqueue(ids.back()));
  }
  const page first = list(stream, "stream", "", 2);
  EXPECT_EQ(first.ids, (std::vector<std::string>{ids[0], ids[1]}));
  EXPECT_EQ(first.next, entries[1]);
  call({"XDEL", stream, entries[0]});  // behind the cursor: finished
  call({"XDEL", stream, entries[2]});  // ahead of it: finished before it was reached
  const std::string later = new_job_id();
  enqueue(later);
  const page second = list(stream, "stream", first.next, 2);
  EXPECT_EQ(second.ids, (std::vector<std::string>{ids[3], ids[4]}));
  const page third = list(stream, "stream", second.next, 2);
  EXPECT_EQ(third.ids, std::vector<std::string>{later});
  EXPECT_EQ(third.next, "") << "a short page ends the walk";
  EXPECT_EQ(list(stream, "stream", "", 100).next, "");
}

TEST_F(ListScript, AScanFindsTheFewJobsInAStateAmongThousandsAndWalksEveryOneOnce) {
  // 3,000 finished jobs and 3 waiting ones: the waiting ones in the first
  // page, where one SCAN page of 50 keys would most likely hold none.
  std::vector<std::string> finished_ids;
  for (int i = 0; i < 3000; ++i) {
    finished_ids.push_back(new_job_id());
    call(job_hash(job(finished_ids.back())).set(job_field::state, i % 2 == 0 ? "ok" : "error"));
  }
  std::set<std::string> waiting;
  for (int i = 0; i < 3; ++i) waiting.insert(new_job_id());
  for (const std::string& id : waiting) call(job_hash(job(id)).state(job_state::waiting));
  call({"SET", "hg:{t}:children:x", "not a job"});
  const page found = list(stream, "scan", "", 50, "waiting");
  EXPECT_EQ(std::set<std::string>(found.ids.begin(), found.ids.end()), waiting);
  EXPECT_EQ(found.next, "") << "3,003 keys are within one call's reading";

  // Finished, 100 a page: every finished job once over the walk, no waiting one.
  std::set<std::string> walked;
  std::string cursor;
  int pages = 0;
  do {
    const page p = list(stream, "scan", cursor, 100, "finished");
    EXPECT_LE(p.ids.size(), 150u) << "about a page's count (SCAN may return a few more)";
    for (const std::string& id : p.ids) EXPECT_TRUE(walked.insert(id).second) << id << " twice";
    cursor = p.next;
    ASSERT_LT(++pages, 1000);
  } while (!cursor.empty());
  EXPECT_EQ(walked, std::set<std::string>(finished_ids.begin(), finished_ids.end()));
  EXPECT_GE(pages, 20) << "pages of about 100";

  const page any = list(stream, "scan", "", 1000, "*");
  EXPECT_GE(any.ids.size(), 1000u);
}

TEST_F(ListScript, ADelayedSetWalkOrdersTiesInDueTimeByIdAndNeverRepeatsOne) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(new_job_id());
  std::sort(ids.begin(), ids.end());
  for (int i = 0; i < 4; ++i) call({"ZADD", delayed, "1733400000123", ids[i]});  // four due at one ms
  call({"ZADD", delayed, "1733400000500", ids[4]});
  const page first = list(delayed, "zset", "", 3);
  EXPECT_EQ(first.ids, (std::vector<std::string>{ids[0], ids[1], ids[2]}));
  EXPECT_EQ(first.next, "1733400000123:" + ids[2]);
  call({"ZREM", delayed, ids[1]});                 // behind the cursor
  const std::string early = std::string(32, '0');  // ahead of the cursor in the tie, but before it by id
  call({"ZADD", delayed, "1733400000123", early});
  const page second = list(delayed, "zset", first.next, 3);
  EXPECT_EQ(second.ids, (std::vector<std::string>{ids[3], ids[4]}));
  EXPECT_EQ(second.next, "");
  std::set<std::string> all(first.ids.begin(), first.ids.end());
  all.insert(second.ids.begin(), second.ids.end());
  EXPECT_EQ(all.size(), 5u);
  EXPECT_TRUE(call({"EVAL", std::string(detail::list_script), "1", delayed, "zset", "bad", "1"}).is_error());
}

}  // namespace
}  // namespace hourglass::fleet::testing
