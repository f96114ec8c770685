// SPDX-License-Identifier: MIT
// Following a directory by its change log (docs/protocol.md §6 "Change logs"):
// protocol::log_follower decides, from the directory's stat and its log, whether a read can
// be applied or the directory must be listed.
#include "protocol/change_log.hpp"

#include "protocol/layout.hpp"

#include <gtest/gtest.h>

namespace ZKD_UNITY_ID {

using zkd::protocol::dir_stat;
using zkd::protocol::log_follower;
using step = zkd::protocol::log_follower::step;

namespace {

constexpr std::int64_t incarnation = 4242;

dir_stat at(std::int32_t version, std::int32_t cversion) {
    return dir_stat{incarnation, version, cversion};
}

}  // namespace

TEST(ProtocolLogFollower, ListsUntilItHasListedOnce) {
    log_follower f;
    EXPECT_FALSE(f.following());
    EXPECT_EQ(f.read(at(3, 9), 1), step::list);
    f.listed(at(3, 9));
    EXPECT_TRUE(f.following());
}

TEST(ProtocolLogFollower, AppliesTheNextLogWhoseCreatesAccountForEveryChange) {
    log_follower f;
    f.listed(at(3, 9));
    EXPECT_EQ(f.read(at(4, 11), 2), step::apply);  // two children created by version 4
    EXPECT_EQ(f.read(at(5, 12), 1), step::apply);
}

TEST(ProtocolLogFollower, CountsTheReadersOwnDeletes) {
    log_follower f;
    f.listed(at(3, 9));
    f.removed(2);                                  // say, two assignments taken (T2)
    EXPECT_EQ(f.read(at(4, 12), 1), step::apply);  // 9 + 2 deletes + 1 create
    f.removed();
    EXPECT_EQ(f.read(at(4, 13), std::nullopt), step::skip);  // only our delete since
}

TEST(ProtocolLogFollower, ListsAfterAMissedVersion) {
    log_follower f;
    f.listed(at(3, 9));
    EXPECT_EQ(f.read(at(5, 11), 1), step::list);  // version 4 was overwritten unread
    f.listed(at(5, 11));
    EXPECT_EQ(f.read(at(6, 12), 1), step::apply);
}

TEST(ProtocolLogFollower, ListsAfterAChangeNobodyLogged) {
    log_follower f;
    f.listed(at(3, 9));
    // Someone created a child without a log: the log of version 4 does not account for it.
    EXPECT_EQ(f.read(at(4, 11), 1), step::list);
    f.listed(at(4, 11));
    // Someone deleted a child (not us), and nothing was logged.
    EXPECT_EQ(f.read(at(4, 12), std::nullopt), step::list);
}

TEST(ProtocolLogFollower, ListsWhenTheDataIsNoLog) {
    log_follower f;
    f.listed(at(3, 9));
    EXPECT_EQ(f.read(at(4, 10), std::nullopt), step::list);  // garbage in the directory's data
}

TEST(ProtocolLogFollower, ListsADirectoryMadeAgain) {
    log_follower f;
    f.listed(at(3, 9));
    // Deleted and made again: versions start over, and could even match.
    EXPECT_EQ(f.read(dir_stat{incarnation + 1, 4, 10}, 1), step::list);
    f.forget();
    EXPECT_EQ(f.read(at(4, 10), 1), step::list);
}

TEST(ProtocolLogFollower, AReadOlderThanTheLastListingIsListed) {
    log_follower f;
    f.listed(at(5, 12));
    EXPECT_EQ(f.read(at(4, 11), 1), step::list);
}

TEST(ProtocolLayout, TheDirectoriesWithChangeLogs) {
    using zkd::protocol::is_logged_dir;
    EXPECT_TRUE(is_logged_dir("/pending/07"));
    EXPECT_TRUE(is_logged_dir("/assign/host-1-9f0c1a2b"));
    EXPECT_FALSE(is_logged_dir("/pending"));
    EXPECT_FALSE(is_logged_dir("/pending/"));
    EXPECT_FALSE(is_logged_dir("/pending/07/t5-x"));
    EXPECT_FALSE(is_logged_dir("/results/07"));       // a result shard (names that are not ids)
    EXPECT_TRUE(is_logged_dir("/results/3fa9c2d1"));  // a client's results
    EXPECT_FALSE(is_logged_dir("/results/3fa9c2d1/t5-1763733600123-3fa9c2d100002a"));
    EXPECT_FALSE(is_logged_dir("/results/3FA9C2D1"));
    EXPECT_FALSE(is_logged_dir("/results/3fa9c2d"));
    EXPECT_FALSE(is_logged_dir("/workers/host-1-9f0c1a2b"));
}

}  // namespace ZKD_UNITY_ID
