// SPDX-License-Identifier: MIT
// Task ids, shards, member ids and election names (docs/protocol.md §2, §3, §7).
#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

TEST(ProtocolIds, Fnv1a32KnownVectors) {
    EXPECT_EQ(fnv1a32(""), 0x811c9dc5U);
    EXPECT_EQ(fnv1a32("a"), 0xe40c292cU);
    EXPECT_EQ(fnv1a32("foobar"), 0xbf9cf968U);
    // Bytes, not chars: high bytes must not sign-extend.
    EXPECT_EQ(fnv1a32("\xff"), (0x811c9dc5U ^ 0xffU) * 16777619U);
}

TEST(ProtocolIds, TaskIdMatchesTheProtocolExample) {
    task_id_generator gen(0x3fa9c2d1, 0x2a);
    EXPECT_EQ(gen.next(5, 1763733600123), "t4-1763733600123-3fa9c2d100002a");
    EXPECT_EQ(gen.next(5, 1763733600123), "t4-1763733600123-3fa9c2d100002b");
    EXPECT_EQ(gen.client(), 0x3fa9c2d1U);
    EXPECT_EQ(gen.client_hex(), "3fa9c2d1");
}

TEST(ProtocolIds, TaskIdPadsAndClamps) {
    task_id_generator gen(0xa, 0);
    EXPECT_EQ(gen.next(9, 42), "t0-0000000000042-0000000a000000");
    EXPECT_EQ(gen.next(0, 0), "t9-0000000000000-0000000a000001");
    EXPECT_EQ(gen.next(12, -5), "t0-0000000000000-0000000a000002");
    EXPECT_EQ(gen.next(-3, 99'999'999'999'999), "t9-9999999999999-0000000a000003");
}

TEST(ProtocolIds, TaskIdCounterWrapsAt24Bits) {
    task_id_generator gen(0xdeadbeef, 0xfffffe);
    EXPECT_EQ(gen.next(5, 1), "t4-0000000000001-deadbeeffffffe");
    EXPECT_EQ(gen.next(5, 1), "t4-0000000000001-deadbeefffffff");
    EXPECT_EQ(gen.next(5, 1), "t4-0000000000001-deadbeef000000");
    task_id_generator high(1, 0xffffffffU);  // the 32-bit counter wraps in step with 24 bits
    EXPECT_EQ(high.next(5, 1), "t4-0000000000001-00000001ffffff");
    EXPECT_EQ(high.next(5, 1), "t4-0000000000001-00000001000000");
}

TEST(ProtocolIds, TaskIdsSortByPriorityThenTimeThenCounter) {
    task_id_generator gen(0x12345678);
    const auto low_early = gen.next(1, 1000);
    const auto high_late = gen.next(8, 5000);
    const auto mid_early = gen.next(5, 1000);
    const auto mid_late = gen.next(5, 2000);
    const auto mid_late2 = gen.next(5, 2000);
    std::vector<std::string> ids{low_early, mid_late2, mid_early, high_late, mid_late};
    std::sort(ids.begin(), ids.end());
    const std::vector<std::string> expected{high_late, mid_early, mid_late, mid_late2, low_early};
    EXPECT_EQ(ids, expected);
}

TEST(ProtocolIds, BundleIdsAndTheirTasks) {
    const std::string tid = "t4-1763733600123-3fa9c2d100002a";
    const auto bid = bundle_id(tid, 64);
    EXPECT_EQ(bid, tid + "_64");
    EXPECT_TRUE(is_valid_task_id(bid));
    EXPECT_EQ(bundle_size(bid), 64U);
    EXPECT_EQ(bundle_size(tid), 0U);
    EXPECT_EQ(task_id_priority(bid), 5);
    EXPECT_EQ(bundled_task_id(bid, 7), bid + ".7");

    const auto plain = parse_task_ref(tid);
    ASSERT_TRUE(plain);
    EXPECT_EQ(plain->node, tid);
    EXPECT_FALSE(plain->index);
    const auto whole = parse_task_ref(bid);
    ASSERT_TRUE(whole);
    EXPECT_EQ(whole->node, bid);
    EXPECT_FALSE(whole->index);
    const std::string last = bid + ".63";  // parse_task_ref's views point into its argument
    const auto one = parse_task_ref(last);
    ASSERT_TRUE(one);
    EXPECT_EQ(one->node, bid);
    EXPECT_EQ(one->index, 63U);

    // The size bounds the index; numbers are plain decimals; a plain task has no tasks.
    for (const auto& bad :
         {bid + ".64", bid + ".07", bid + ".", bid + ".-1", bid + ".x", tid + ".0", tid + "_0",
          tid + "_01", tid + "_1001", tid + "_", tid + "_64.1.2", tid + "_64_2",
          std::string("t4-1763733600123-3fa9c2d100002A_2")}) {
        EXPECT_FALSE(parse_task_ref(bad)) << bad;
    }
    EXPECT_FALSE(is_valid_task_id(bid + ".1"));  // a bundled task names no node
    EXPECT_TRUE(is_valid_task_id(tid + "_1000"));
    EXPECT_TRUE(is_valid_task_id(tid + "_1"));
    EXPECT_EQ(fnv1a32(bid), 3830847410U);  // shards are hashed over the bundle id
    EXPECT_EQ(shard_of(bid, 16), 2U);
}

TEST(ProtocolIds, TaskIdGeneratorIsThreadSafe) {
    task_id_generator gen;
    std::vector<std::string> a;
    std::vector<std::string> b;
    a.reserve(5000);
    b.reserve(5000);
    std::thread t([&] {
        for (int i = 0; i < 5000; ++i)
            a.push_back(gen.next(5, 7));
    });
    for (int i = 0; i < 5000; ++i)
        b.push_back(gen.next(5, 7));
    t.join();
    std::set<std::string> all(a.begin(), a.end());
    all.insert(b.begin(), b.end());
    EXPECT_EQ(all.size(), 10000U);
    for (const auto& id : all)
        ASSERT_TRUE(is_valid_task_id(id)) << id;
}

TEST(ProtocolIds, RandomClientIds) {
    task_id_generator a;
    task_id_generator b;
    EXPECT_EQ(a.client_hex().size(), 8U);
    EXPECT_NE(a.client(), b.client());  // 1 in 2^32 to fail
    EXPECT_TRUE(is_valid_task_id(a.next(5, 1763733600123)));
}

TEST(ProtocolIds, TaskIdValidation) {
    EXPECT_TRUE(is_valid_task_id("t4-1763733600123-3fa9c2d100002a"));
    EXPECT_TRUE(is_valid_task_id("t0-0000000000000-00000000000000"));
    for (const auto* bad : {
             "",
             "t4-1763733600123-3fa9c2d100002",    // short
             "t4-1763733600123-3fa9c2d100002a0",  // long
             "t4-1763733600123-3FA9C2D100002A",   // upper case hex
             "u4-1763733600123-3fa9c2d100002a",
             "tx-1763733600123-3fa9c2d100002a",
             "t4_1763733600123-3fa9c2d100002a",
             "t4-176373360012x-3fa9c2d100002a",
             "t4-1763733600123_3fa9c2d100002a",
             "t4-1763733600123-3fa9c2d100002g",
             "t4-1763733600123-3fa9c2d100002a.cancel",
         }) {
        EXPECT_FALSE(is_valid_task_id(bad)) << bad;
        EXPECT_FALSE(task_id_priority(bad)) << bad;
        EXPECT_FALSE(task_id_ms(bad)) << bad;
    }
    EXPECT_EQ(task_id_ms("t4-1763733600123-3fa9c2d100002a"), 1763733600123);
    EXPECT_EQ(task_id_ms("t4-0000000000007-3fa9c2d100002a_3"), 7);
    EXPECT_EQ(task_id_priority("t4-1763733600123-3fa9c2d100002a"), 5);
    EXPECT_EQ(task_id_priority("t0-1763733600123-3fa9c2d100002a"), 9);
    EXPECT_EQ(task_id_priority("t9-1763733600123-3fa9c2d100002a"), 0);
}

TEST(ProtocolShards, Names) {
    EXPECT_EQ(shard_name(0), "00");
    EXPECT_EQ(shard_name(7), "07");
    EXPECT_EQ(shard_name(15), "15");
    EXPECT_EQ(shard_name(123), "123");
    EXPECT_EQ(shard_name(4294967295U), "4294967295");
}

TEST(ProtocolShards, ShardOfIsFnvModulo) {
    const std::string tid = "t4-1763733600123-3fa9c2d100002a";
    for (const std::uint32_t n : {1U, 2U, 16U, 17U, 1000U}) {
        EXPECT_EQ(shard_of(tid, n), fnv1a32(tid) % n);
        EXPECT_LT(shard_of(tid, n), n);
    }
    EXPECT_EQ(shard_of(tid, 0), 0U);  // never a division by zero
}

TEST(ProtocolShards, SpreadEvenly) {
    task_id_generator gen(0xcafef00d);
    std::vector<int> counts(16);
    for (int i = 0; i < 16000; ++i)
        ++counts[shard_of(gen.next(5, 1763733600000 + i / 7), 16)];
    for (const int c : counts) {
        EXPECT_GT(c, 800);
        EXPECT_LT(c, 1200);
    }
}

TEST(ProtocolMemberIds, NewIdsAreValidAndFresh) {
    const auto a = new_member_id("node-1.example.com", 1234);
    const auto b = new_member_id("node-1.example.com", 1234);
    EXPECT_NE(a, b);  // a new random part per session
    EXPECT_TRUE(a.starts_with("node-1.example.com-1234-")) << a;
    EXPECT_EQ(a.size(), std::string("node-1.example.com-1234-").size() + 8);
    EXPECT_TRUE(is_valid_member_id(a)) << a;
    EXPECT_TRUE(is_valid_member_id(b)) << b;
}

TEST(ProtocolMemberIds, HostIsSanitized) {
    EXPECT_TRUE(new_member_id("my host/\xc3\xa9!", 7).starts_with("my_host____-7-"));
    EXPECT_TRUE(new_member_id("", 7).starts_with("host-7-"));
    EXPECT_TRUE(new_member_id("a_b.c-d", 0).starts_with("a_b.c-d-0-"));
    EXPECT_TRUE(new_member_id("h", -5).starts_with("h-0-"));
    const auto long_host = new_member_id(std::string(1000, 'x'), 1);
    EXPECT_EQ(long_host.size(), max_member_host_length + 1 + 1 + 1 + 8);
    for (const auto& id :
         {new_member_id("my host/\xc3\xa9!", 7), new_member_id("", 7), new_member_id("h", -5),
          long_host}) {
        EXPECT_TRUE(is_valid_member_id(id)) << id;
    }
}

TEST(ProtocolMemberIds, Validation) {
    for (const auto* good : {"host-1234-9f0c1a2b", "a-b-c-1-00000000", "h.x_y-0-ffffffff"}) {
        EXPECT_TRUE(is_valid_member_id(good)) << good;
    }
    for (const auto* bad :
         {"", "host-1234-9f0c1a2", "host-1234-9F0C1A2B", "host-1234-9f0c1a2bb", "-1234-9f0c1a2b",
          "host--9f0c1a2b", "host-12a4-9f0c1a2b", "host1234-9f0c1a2b", "ho st-1234-9f0c1a2b",
          "host-1234_9f0c1a2b", "host/x-1234-9f0c1a2b", "host-12345678901234567890-9f0c1a2b"}) {
        EXPECT_FALSE(is_valid_member_id(bad)) << bad;
    }
    EXPECT_FALSE(is_valid_member_id(std::string(max_member_host_length + 1, 'h') + "-1-00000000"));
}

TEST(ProtocolElection, PrefixAndParse) {
    EXPECT_EQ(election_node_prefix("host-1234-9f0c1a2b"), "c-host-1234-9f0c1a2b-");
    const auto node = parse_election_node("c-host-1234-9f0c1a2b-0000000042");
    ASSERT_TRUE(node);
    EXPECT_EQ(node->member, "host-1234-9f0c1a2b");
    EXPECT_EQ(node->sequence, 42);
    const auto big = parse_election_node("c-a-b-1-00000000-2147483647");
    ASSERT_TRUE(big);
    EXPECT_EQ(big->member, "a-b-1-00000000");
    EXPECT_EQ(big->sequence, 2147483647);
    // What we create parses back, whatever the member.
    const auto me = new_member_id("x-y", 99);
    EXPECT_EQ(parse_election_node(election_node_prefix(me) + "0000000007"), (election_node{me, 7}));
}

TEST(ProtocolElection, ForeignNamesAreRejected) {
    for (const auto* bad : {
             "",
             "c-",
             "c--0000000001",
             "c-host-1234-9f0c1a2b-",
             "c-host-1234-9f0c1a2b-000000001",    // 9 digits
             "c-host-1234-9f0c1a2b-00000000001",  // 11 digits
             "c-host-1234-9f0c1a2b0000000001",
             "c-host-1234-9f0c1a2b-00000000x1",
             "x-host-1234-9f0c1a2b-0000000001",
             "host-1234-9f0c1a2b-0000000001",
             "c-host-1234-9f0c1a2-0000000001",  // bad member id
             "c-host-1234-9f0c1a2b--000000001",
             "n_0000000001",
         }) {
        EXPECT_FALSE(parse_election_node(bad)) << bad;
    }
}

}  // namespace

TEST(ProtocolIds, TheClientPartOfATaskIdNamesItsResultsDirectory) {
    task_id_generator gen(0x3fa9c2d1U);
    const auto tid = gen.next(5, 1763733600123);
    EXPECT_EQ(task_id_client(tid), "3fa9c2d1");
    EXPECT_EQ(task_id_client(bundle_id(tid, 7)), "3fa9c2d1");
    EXPECT_TRUE(is_client_id(task_id_client(tid)));
    // Not a task id (a bundled task's own id names no node): no client.
    EXPECT_EQ(task_id_client(bundled_task_id(bundle_id(tid, 7), 3)), "");
    EXPECT_EQ(task_id_client("t4-1763733600123-3FA9C2D100002a"), "");
    EXPECT_EQ(task_id_client(""), "");
    EXPECT_FALSE(is_client_id("3fa9c2d"));
    EXPECT_FALSE(is_client_id("3fa9c2dg"));
}

}  // namespace ZKD_UNITY_ID
