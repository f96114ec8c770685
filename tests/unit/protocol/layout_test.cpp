// SPDX-License-Identifier: MIT
// The znode paths of docs/protocol.md §2.
#include "protocol/layout.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "zkco/types.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

constexpr std::string_view tid = "t4-1763733600123-3fa9c2d100002a";
constexpr std::string_view member = "host-1234-9f0c1a2b";

TEST(ProtocolLayout, FixedPaths) {
    EXPECT_EQ(layout::meta(), "/meta");
    EXPECT_EQ(layout::epoch(), "/epoch");
    EXPECT_EQ(layout::election_dir(), "/election");
    EXPECT_EQ(layout::master(), "/master");
    EXPECT_EQ(layout::workers_dir(), "/workers");
    EXPECT_EQ(layout::assign_dir(), "/assign");
    EXPECT_EQ(layout::pending_dir(), "/pending");
    EXPECT_EQ(layout::results_dir(), "/results");
    EXPECT_EQ(layout::cancel_dir(), "/cancel");
    EXPECT_EQ(chroot_path("default"), "/zkd/default");
}

TEST(ProtocolLayout, MemberPaths) {
    EXPECT_EQ(layout::election_prefix(member), "/election/c-host-1234-9f0c1a2b-");
    EXPECT_EQ(layout::worker(member), "/workers/host-1234-9f0c1a2b");
    EXPECT_EQ(layout::assign_dir(member), "/assign/host-1234-9f0c1a2b");
    EXPECT_EQ(
        layout::assignment(member, tid),
        "/assign/host-1234-9f0c1a2b/t4-1763733600123-3fa9c2d100002a"
    );
    EXPECT_EQ(
        layout::cancel_marker(member, tid),
        "/assign/host-1234-9f0c1a2b/t4-1763733600123-3fa9c2d100002a.cancel"
    );
    EXPECT_EQ(layout::cancel_request(tid), "/cancel/t4-1763733600123-3fa9c2d100002a");
}

TEST(ProtocolLayout, TaskPathsUseTheShardOfTheId) {
    const layout l;
    EXPECT_EQ(l.pending_shards, 16U);
    EXPECT_EQ(l.result_shards, 16U);
    const auto s = shard_name(fnv1a32(tid) % 16);
    EXPECT_EQ(l.pending_task(tid), "/pending/" + s + "/" + std::string(tid));
    EXPECT_EQ(l.result(tid), "/results/3fa9c2d1/" + std::string(tid));  // its client's

    const layout odd{3, 1000};
    EXPECT_EQ(
        odd.pending_task(tid), "/pending/" + shard_name(fnv1a32(tid) % 3) + "/" + std::string(tid)
    );
    // A task's result goes to its client's directory, whatever the shard counts.
    EXPECT_EQ(
        odd.result(tid), "/results/" + std::string(tid.substr(17, 8)) + "/" + std::string(tid)
    );
    EXPECT_EQ(odd.result_dir(tid), layout::client_results(tid.substr(17, 8)));
    const std::string bundle = std::string(tid) + "_12";
    EXPECT_EQ(odd.result(bundle), odd.result_dir(tid) + "/" + bundle);
    // Any other name (a pending node a stranger made, §8): the result shard of the name.
    const std::string_view stranger = "not-a-task-id";
    EXPECT_EQ(
        odd.result(stranger),
        "/results/" + shard_name(fnv1a32(stranger) % 1000) + "/" + std::string(stranger)
    );
    EXPECT_TRUE(layout::is_client_results(tid.substr(17, 8)));
    EXPECT_FALSE(layout::is_client_results("07"));
    EXPECT_FALSE(layout::is_client_results("3fa9c2d1x"));
    EXPECT_EQ(layout::pending_shard(0), "/pending/00");
    EXPECT_EQ(layout::pending_shard(5), "/pending/05");
    EXPECT_EQ(layout::result_shard(15), "/results/15");
    EXPECT_EQ(layout::result_shard(100), "/results/100");

    const layout zero{0, 0};
    EXPECT_EQ(zero.pending_task(tid), "/pending/00/" + std::string(tid));
    EXPECT_EQ(zero.pending_shard_paths(), std::vector<std::string>{"/pending/00"});
}

TEST(ProtocolLayout, FromMeta) {
    meta_info meta;
    meta.pending_shards = 4;
    meta.result_shards = 32;
    EXPECT_EQ(layout::from(meta), (layout{4, 32}));
}

TEST(ProtocolLayout, ShardLists) {
    const layout l{3, 2};
    EXPECT_EQ(
        l.pending_shard_paths(),
        (std::vector<std::string>{"/pending/00", "/pending/01", "/pending/02"})
    );
    EXPECT_EQ(l.result_shard_paths(), (std::vector<std::string>{"/results/00", "/results/01"}));
}

TEST(ProtocolLayout, FixedNodesParentsFirst) {
    for (const layout l : {layout{}, layout{1, 1}, layout{3, 120}}) {
        const auto nodes = l.fixed_nodes();
        EXPECT_EQ(nodes.size(), 10U + 2 * l.pending_shards + l.result_shards);
        EXPECT_EQ(nodes.front(), "/meta");
        std::set<std::string> seen;
        for (const auto& p : nodes) {
            EXPECT_FALSE(zkd::zkco::validate_path(p)) << p;
            const auto parent = std::string(zkd::zkco::parent_path(p));
            EXPECT_TRUE(parent == "/" || seen.contains(parent)) << p << " before " << parent;
            EXPECT_TRUE(seen.insert(p).second) << "twice: " << p;
        }
        for (const auto& must :
             {layout::epoch(), layout::election_dir(), layout::workers_dir(), layout::assign_dir(),
              layout::pending_dir(), layout::results_dir(), layout::cancel_dir(),
              layout::receipts_dir()}) {
            EXPECT_TRUE(seen.contains(must)) << must;
        }
        for (const auto& p : l.pending_shard_paths())
            EXPECT_TRUE(seen.contains(p)) << p;
        for (const auto& p : l.result_shard_paths())
            EXPECT_TRUE(seen.contains(p)) << p;
        for (std::uint32_t i = 0; i < l.pending_shards; ++i)
            EXPECT_TRUE(seen.contains(layout::delayed_shard(i))) << i;
        // Ephemeral nodes are not fixed.
        EXPECT_FALSE(seen.contains(layout::master()));
    }
}

TEST(ProtocolLayout, EveryPathIsValid) {
    const layout l;
    for (const auto& p :
         {layout::election_prefix(member) + "0000000001", layout::worker(member),
          layout::assign_dir(member), layout::assignment(member, tid),
          layout::cancel_marker(member, tid), l.pending_task(tid), l.result(tid),
          layout::cancel_request(tid), chroot_path("default")}) {
        EXPECT_FALSE(zkd::zkco::validate_path(p)) << p;
    }
}

TEST(ProtocolLayout, CancelMarkers) {
    const std::string marker = std::string(tid) + ".cancel";
    EXPECT_EQ(zkd::zkco::base_name(layout::cancel_marker(member, tid)), marker);
    EXPECT_TRUE(is_cancel_marker(marker));
    EXPECT_EQ(marker_task(marker), tid);
    for (const std::string_view not_marker :
         {tid, std::string_view(".cancel"), std::string_view(""), std::string_view("x.cancel2"),
          std::string_view("x.Cancel"), std::string_view("cancel")}) {
        EXPECT_FALSE(is_cancel_marker(not_marker)) << not_marker;
        EXPECT_EQ(marker_task(not_marker), "") << not_marker;
    }
}

}  // namespace

TEST(ProtocolLayout, DelayedTasksShardLikePendingOnes) {
    const layout l{16, 16};
    const std::string tid = "t4-1763733600123-3fa9c2d100002a";
    const auto pending = l.pending_task(tid);
    const auto delayed = l.delayed_task(tid);
    EXPECT_EQ(delayed, "/delayed" + pending.substr(std::string("/pending").size()));
    EXPECT_TRUE(layout::is_delayed_shard("/delayed/07"));
    EXPECT_FALSE(layout::is_delayed_shard("/delayed/07/" + tid));
    EXPECT_FALSE(layout::is_delayed_shard("/delayed/"));
    EXPECT_FALSE(layout::is_delayed_shard("/pending/07"));
    EXPECT_TRUE(is_logged_dir("/delayed/07"));
}

}  // namespace ZKD_UNITY_ID
