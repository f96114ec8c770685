// SPDX-License-Identifier: MIT
// master_fsm (roles/master/detail/master_fsm.hpp), event by event: T8, results nobody consumed
// deleted after the retention, and empty client directories (docs/protocol.md §6 T8).
#include "unit/roles/master/master_fsm_fixture.hpp"

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

namespace {

constexpr std::int64_t day_ms = 24L * 3600 * 1000;  // the default retention

master_saw::node_stat dir_stat(std::int32_t children, std::int32_t cversion, std::int64_t at_ms) {
    return master_saw::node_stat{children, cversion, 3, at_ms, at_ms};
}

}  // namespace

TEST_F(MasterFsm, T8DeletesResultsPastTheRetentionAndOldEmptyClientDirectories) {
    const std::int64_t now_ms = 10 * day_ms;
    const auto shard = protocol::layout::result_shard(0);
    const auto client = protocol::layout::client_results("3fa9c2d1");
    const auto idle = protocol::layout::client_results("3fa9c2d2");
    ASSERT_TRUE(protocol::is_client_results_dir(client));
    // A sweep reads the stat of the directories /results holds, in order.
    auto stat_dirs = of_kind(
        view.on(result_dirs_listed{{idle, shard, client}, now_ms}, t0), kind::stat_result_dirs
    );
    ASSERT_EQ(stat_dirs.size(), 1U);
    auto sorted = std::vector<std::string>{idle, shard, client};
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(stat_dirs[0].dirs, sorted);
    EXPECT_TRUE(view.on(result_dirs_listed{{shard}, now_ms}, t0).actions.empty());  // one at a time
    // The shard and the client's directory hold results: listed. The idle client's directory
    // is empty and older than the retention: deleted at the version read.
    master_saw::result_dirs_stat read{stat_dirs[0].dirs, {}};
    for (const auto& dir : read.dirs) {
        read.stats.push_back(
            dir == shard    ? dir_stat(2, 5, 0)
            : dir == client ? dir_stat(1, 1, 0)
                            : dir_stat(0, 0, now_ms - day_ms - 1)
        );
    }
    auto lists = of_kind(view.on(read, t0), kind::list_results);
    ASSERT_EQ(lists.size(), 1U);
    ASSERT_EQ(lists[0].dirs.size(), 2U);
    EXPECT_TRUE(std::is_permutation(
        lists[0].dirs.begin(), lists[0].dirs.end(), std::vector<std::string>{shard, client}.begin()
    ));
    // Their results are new to the fsm: their ctime read.
    master_saw::results_listed listed{lists[0].dirs, {}};
    for (const auto& dir : listed.dirs) {
        listed.names.emplace_back(
            dir == shard ? std::vector<std::string>{"a", "b"} : std::vector<std::string>{"c"}
        );
    }
    auto reads = of_kind(view.on(listed, t0), kind::stat_results);
    ASSERT_EQ(reads.size(), 1U);
    ASSERT_EQ(reads[0].paths.size(), 3U);
    // a is past the retention, b is not, c is gone.
    using status = master_saw::result_read::status;
    master_saw::results_stat ctimes{reads[0].paths, {}};
    for (const auto& path : ctimes.paths) {
        ctimes.reads.push_back(
            path == shard + "/a"   ? master_saw::result_read{status::ok, now_ms - day_ms - 1}
            : path == shard + "/b" ? master_saw::result_read{status::ok, now_ms - 1}
                                   : master_saw::result_read{status::gone, 0}
        );
    }
    const auto collects = of_kind(view.on(ctimes, t0), kind::collect);
    ASSERT_EQ(collects.size(), 2U);
    EXPECT_EQ(collects[0].path, shard + "/a");
    EXPECT_FALSE(collects[0].dir);
    EXPECT_EQ(collects[0].ops, protocol::collect_ops(shard + "/a"));
    EXPECT_EQ(collects[1].path, idle);
    EXPECT_TRUE(collects[1].dir);
    EXPECT_EQ(collects[1].ops, protocol::collect_dir_ops(idle, 3));
    view.on(answered{collects[0], committed(collects[0].ops.size())}, t0);
    view.on(
        answered{collects[1], failed(collects[1].ops.size(), 0, protocol::op_code::not_empty)}, t0
    );
    EXPECT_EQ(stats.collected, 1U);
    EXPECT_EQ(stats.collected_dirs, 0U);
    // The next sweep, a day later: the shard's children did not change (cversion), so it is
    // not listed again; b, whose ctime is known, is now past the retention too.
    const std::int64_t later_ms = now_ms + day_ms;
    stat_dirs = of_kind(view.on(result_dirs_listed{{shard}, later_ms}, t0), kind::stat_result_dirs);
    ASSERT_EQ(stat_dirs.size(), 1U);
    const auto again = view.on(result_dirs_stat{{shard}, {dir_stat(2, 5, 0)}}, t0);
    EXPECT_TRUE(of_kind(again, kind::list_results).empty());
    const auto later = of_kind(again, kind::collect);
    ASSERT_EQ(later.size(), 2U);  // a (its delete not seen yet by a listing) and b
    EXPECT_EQ(later[1].path, shard + "/b");
}

TEST(MasterFsmCollect, ASweepLooksAtSoManyDirectoriesAndTheNextGoesOnAfterThem) {
    master_stats stats;
    master_fsm::options opts;
    opts.gc_dirs_per_sweep = 2;
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    const std::vector<std::string> dirs{"/results/d1", "/results/d2", "/results/d3"};
    auto s = of_kind(view.on(result_dirs_listed{dirs, day_ms}, t0), kind::stat_result_dirs);
    ASSERT_EQ(s.size(), 1U);
    EXPECT_EQ(s[0].dirs, (std::vector<std::string>{"/results/d1", "/results/d2"}));
    // None read (gone, or a lost connection): the sweep is over all the same.
    EXPECT_TRUE(
        view.on(result_dirs_stat{s[0].dirs, {std::nullopt, std::nullopt}}, t0).actions.empty()
    );
    s = of_kind(view.on(result_dirs_listed{dirs, day_ms}, t0), kind::stat_result_dirs);
    ASSERT_EQ(s.size(), 1U);
    EXPECT_EQ(s[0].dirs, std::vector<std::string>{"/results/d3"});
}

TEST(ResultSweep, SuccessiveSweepsCoverEveryDirectoryAFewAtATime) {
    const std::vector<std::string> dirs{
        "/results/00", "/results/01", "/results/a", "/results/b", "/results/c"};
    auto s = sweep_window(dirs, "", 2);
    EXPECT_EQ(s.dirs, (std::vector<std::string>{"/results/00", "/results/01"}));
    EXPECT_EQ(s.next_after, "/results/01");
    s = sweep_window(dirs, s.next_after, 2);
    EXPECT_EQ(s.dirs, (std::vector<std::string>{"/results/a", "/results/b"}));
    s = sweep_window(dirs, s.next_after, 2);
    EXPECT_EQ(s.dirs, std::vector<std::string>{"/results/c"});
    EXPECT_EQ(s.next_after, "") << "the end was reached: the next sweep starts again";
    // A directory the last sweep ended on may be gone: the next one goes on after its name.
    s = sweep_window({"/results/00", "/results/c"}, "/results/b", 2);
    EXPECT_EQ(s.dirs, std::vector<std::string>{"/results/c"});
    // Past the last one: from the start.
    s = sweep_window(dirs, "/results/z", 10);
    EXPECT_EQ(s.dirs, dirs);
    EXPECT_EQ(s.next_after, "");
    EXPECT_TRUE(sweep_window({}, "", 10).dirs.empty());
}

TEST_F(MasterFsm, T8CollectsATaskOfABundlesOwnResultByAgeLikeAnyResult) {
    // A task of a bundle published early has a result node named by its own id (§6 T4e).
    const std::int64_t now_ms = 10 * day_ms;
    const auto client = protocol::layout::client_results("3fa9c2d1");
    const auto b = protocol::bundle_id("t4-1763733600123-3fa9c2d1000001", 3);
    const auto own = protocol::bundled_task_id(b, 1);
    auto stat_dirs =
        of_kind(view.on(result_dirs_listed{{client}, now_ms}, t0), kind::stat_result_dirs);
    ASSERT_EQ(stat_dirs.size(), 1U);
    auto lists =
        of_kind(view.on(result_dirs_stat{{client}, {dir_stat(2, 2, 0)}}, t0), kind::list_results);
    ASSERT_EQ(lists.size(), 1U);
    auto reads = of_kind(
        view.on(results_listed{{client}, {std::vector<std::string>{b, own}}}, t0),
        kind::stat_results
    );
    ASSERT_EQ(reads.size(), 1U);
    EXPECT_EQ(reads[0].paths, (std::vector<std::string>{client + "/" + b, client + "/" + own}));
    using status = master_saw::result_read::status;
    const auto collects = of_kind(
        view.on(
            results_stat{
                reads[0].paths,
                {master_saw::result_read{status::ok, now_ms - 1},
                 master_saw::result_read{status::ok, now_ms - day_ms - 1}}},
            t0
        ),
        kind::collect
    );
    ASSERT_EQ(collects.size(), 1U);
    EXPECT_EQ(collects[0].path, client + "/" + own);
    EXPECT_EQ(collects[0].ops, protocol::collect_ops(client + "/" + own));
}

}  // namespace ZKD_UNITY_ID
