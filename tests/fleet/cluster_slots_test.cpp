// The Redis Cluster client's pure decisions: key slots (hash tags included),
// the key that routes a command, MOVED/ASK parsing, and the slot map read
// from CLUSTER SLOTS. Checked against a real cluster in redis_cluster_test.cpp.
#include "cluster_slots.hpp"

#include <gtest/gtest.h>

#include "reply_builders.hpp"

namespace hourglass::fleet::detail {
namespace {

using testing::arr;
using testing::err;
using testing::num;
using testing::str;

TEST(KeySlot, IsCrc16OfTheKeyModulo16384AsRedisDocumentsIt) {
  EXPECT_EQ(key_slot("123456789"), 0x31C3);  // CRC16/XMODEM's check value
  EXPECT_EQ(key_slot("somekey"), 11058);     // CLUSTER KEYSLOT's documented examples
  EXPECT_EQ(key_slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(key_slot(""), 0);
}

TEST(KeySlot, HashesOnlyTheFirstNonEmptyHashTag) {
  EXPECT_EQ(key_slot("bar{hash_tag}"), key_slot("hash_tag"));
  EXPECT_EQ(key_slot("hg:{orders}:stream"), key_slot("hg:{orders}:job:abc"));
  EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
  EXPECT_EQ(key_slot("foo{}{bar}"), key_slot(std::string_view("foo{}{bar}")));  // an empty tag: the whole key
  EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
  EXPECT_EQ(key_slot("foo{bar"), key_slot(std::string_view("foo{bar")));  // no closing brace: the whole key
  EXPECT_NE(key_slot("foo{bar"), key_slot("bar"));
}

TEST(CommandKey, NamesTheKeyEachCommandRoutesBy) {
  using v = std::vector<std::string>;
  EXPECT_EQ(command_key(v{"GET", "k"}), "k");
  EXPECT_EQ(command_key(v{"evalsha", "abc", "2", "k1", "k2", "a"}), "k1");
  EXPECT_EQ(command_key(v{"EVAL", "return 1", "0"}), std::nullopt);
  EXPECT_EQ(command_key(v{"XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "BLOCK", "5", "STREAMS", "s", ">"}), "s");
  EXPECT_EQ(command_key(v{"XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"}), "s");
  EXPECT_EQ(command_key(v{"XAUTOCLAIM", "s", "g", "c", "0", "0-0"}), "s");
  for (const char* keyless : {"TIME", "PING", "SCAN", "INFO"}) EXPECT_EQ(command_key(v{keyless}), std::nullopt);
  EXPECT_EQ(command_key(v{"SCRIPT", "LOAD", "return 1"}), std::nullopt);
  EXPECT_EQ(command_key(v{"SCAN", "0", "MATCH", "hg:{q}:job:*"}), std::nullopt);
  EXPECT_EQ(command_key(v{}), std::nullopt);
}

TEST(Redirect, ParsesMovedAndAskWithTheirNodes) {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->how, redirect::kind::moved);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->host, "127.0.0.1");
  EXPECT_EQ(m->port, 6381);
  auto a = parse_redirect("ASK 16383 ::1:7000");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->how, redirect::kind::ask);
  EXPECT_EQ(a->slot, 16383);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 7000);
  auto b = parse_redirect("ASK 1 [::1]:7001");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->host, "::1");
  auto unknown = parse_redirect("MOVED 5 :7002");  // Redis's unknown endpoint: the node that answered
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->host, "");
  EXPECT_EQ(unknown->port, 7002);
  for (const char* other : {"ERR unknown command", "MOVED", "MOVED ", "ASK", "ASK ", "MOVED 16384 a:1", "MOVED x a:1",
                            "MOVED 5 a", "MOVED 5 a:0", "MOVEDX 5 a:1", "ASKING 5 a:1", "MOVED 5 a:99999"}) {
    EXPECT_FALSE(parse_redirect(other)) << other;
  }
  EXPECT_TRUE(is_try_again("TRYAGAIN Multiple keys request during rehashing of slot"));
  EXPECT_TRUE(is_cluster_down("CLUSTERDOWN The cluster is down"));
  EXPECT_FALSE(is_cluster_down("ERR CLUSTERDOWN"));
}

redis_reply node(std::string host, long long port) { return arr({str(std::move(host)), num(port), str("id")}); }

TEST(SlotMap, ReadsWhoServesEachSlotFromClusterSlots) {
  const redis_reply reply = arr({
      arr({num(0), num(5460), node("127.0.0.1", 7000), node("127.0.0.1", 7003)}),
      arr({num(5461), num(10922), node("127.0.0.1", 7001)}),
      arr({num(10923), num(16000), node("", 7002)}),  // "": the node asked
      arr({num(16001), num(16001), node("127.0.0.1", 7000)}),
  });
  const slot_map m = slot_map::from_cluster_slots(reply, {"10.0.0.9", 7005});
  ASSERT_EQ(m.masters().size(), 3u);
  EXPECT_EQ(*m.owner(0), (cluster_node{"127.0.0.1", 7000}));
  EXPECT_EQ(*m.owner(5460), (cluster_node{"127.0.0.1", 7000}));
  EXPECT_EQ(*m.owner(5461), (cluster_node{"127.0.0.1", 7001}));
  EXPECT_EQ(*m.owner(16000), (cluster_node{"10.0.0.9", 7002}));
  EXPECT_EQ(*m.owner(16001), (cluster_node{"127.0.0.1", 7000}));
  EXPECT_EQ(m.owner(16002), nullptr) << "a slot no master serves (a failover under way)";
  EXPECT_EQ(m.owner(16384), nullptr);
  EXPECT_EQ(slot_map().owner(0), nullptr);
}

TEST(SlotMap, AMovedRecordsTheSlotsNewMaster) {
  slot_map m = slot_map::from_cluster_slots(arr({arr({num(0), num(16383), node("127.0.0.1", 7000)})}),
                                            {"127.0.0.1", 7000});
  m.move(42, {"127.0.0.1", 7001});
  EXPECT_EQ(*m.owner(42), (cluster_node{"127.0.0.1", 7001}));
  EXPECT_EQ(*m.owner(41), (cluster_node{"127.0.0.1", 7000}));
  EXPECT_EQ(m.masters().size(), 2u);
  EXPECT_EQ((cluster_node{"::1", 7000}).address(), "[::1]:7000");
}

TEST(SlotMap, AReplyOfAnotherShapeIsTheBrokerUnavailable) {
  EXPECT_THROW(slot_map::from_cluster_slots(err("ERR This instance has cluster support disabled"), {}),
               redis_unavailable);
  EXPECT_THROW(slot_map::from_cluster_slots(arr({arr({num(5), num(4), node("a", 1)})}), {}), redis_unavailable);
  EXPECT_THROW(slot_map::from_cluster_slots(arr({arr({num(0), num(16384), node("a", 1)})}), {}), redis_unavailable);
  EXPECT_THROW(slot_map::from_cluster_slots(arr({arr({num(0), num(1), node("a", 0)})}), {}), redis_unavailable);
  EXPECT_THROW(slot_map::from_cluster_slots(arr({arr({num(0), num(1)})}), {}), redis_unavailable);
}

}  // namespace
}  // namespace hourglass::fleet::detail
