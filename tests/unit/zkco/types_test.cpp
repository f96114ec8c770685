// SPDX-License-Identifier: MIT
// zkco's pure logic: error mapping, paths, connect strings, digests, request sizes.
#include "zkco/types.hpp"

#include "zkco/config.hpp"
#include "zkco/error.hpp"

#include <boost/asio/error.hpp>

#include <gtest/gtest.h>

namespace ZKD_UNITY_ID {

using namespace zkd::zkco;

namespace {

TEST(ZkcoError, CodesMapFromTheCClient) {
    EXPECT_FALSE(from_zk_rc(0));
    EXPECT_EQ(from_zk_rc(-101), errc::no_node);
    EXPECT_EQ(from_zk_rc(-110), errc::node_exists);
    EXPECT_EQ(from_zk_rc(-4), errc::connection_loss);
    EXPECT_EQ(from_zk_rc(-112), errc::session_expired);
    EXPECT_EQ(errc_name(errc::bad_version), "ZBADVERSION");
    EXPECT_EQ(errc_name(static_cast<errc>(-999)), "ZUNKNOWN");
    EXPECT_EQ(make_error_code(errc::no_node).message(), "node does not exist");
    EXPECT_NE(make_error_code(static_cast<errc>(-999)).message().find("-999"), std::string::npos);
    EXPECT_STREQ(zk_category().name(), "zkd.zk");
}

TEST(ZkcoError, ConditionsGroupTheCodes) {
    for (const auto e : {errc::connection_loss, errc::operation_timeout}) {
        EXPECT_EQ(make_error_code(e), condition::retryable) << errc_name(e);
        EXPECT_NE(make_error_code(e), condition::check_failed);
    }
    for (const auto e :
         {errc::no_node, errc::node_exists, errc::bad_version, errc::not_empty,
          errc::no_children_for_ephemerals}) {
        EXPECT_EQ(make_error_code(e), condition::check_failed) << errc_name(e);
        EXPECT_NE(make_error_code(e), condition::session_lost);
    }
    for (const auto e : {errc::session_expired, errc::closing, errc::auth_failed}) {
        EXPECT_EQ(make_error_code(e), condition::session_lost) << errc_name(e);
        EXPECT_NE(make_error_code(e), condition::retryable);
    }
    // An abandoned wait leaves the outcome as unknown as a lost connection does.
    EXPECT_EQ(error_code(boost::asio::error::operation_aborted), condition::retryable);
    EXPECT_NE(make_error_code(errc::bad_arguments), condition::retryable);
    EXPECT_NE(make_error_code(errc::no_auth), condition::check_failed);
}

TEST(ZkcoPath, Validation) {
    for (const auto* good : {"/", "/a", "/a/b", "/a-b/c_d.e", "/zkd/tasks/t-0000000001"}) {
        EXPECT_FALSE(validate_path(good)) << good;
    }
    for (const auto* bad :
         {"", "a", "a/b", "/a/", "//", "/a//b", "/a/./b", "/a/../b", "/.", "/.."}) {
        EXPECT_EQ(validate_path(bad), errc::bad_arguments) << bad;
    }
    EXPECT_EQ(validate_path(std::string_view("/a\0b", 4)), errc::bad_arguments);
}

TEST(ZkcoPath, JoinParentBase) {
    EXPECT_EQ(join_path("/", "a"), "/a");
    EXPECT_EQ(join_path("/a", "b"), "/a/b");
    EXPECT_EQ(join_path("/a/", "b"), "/a/b");
    EXPECT_EQ(parent_path("/a/b"), "/a");
    EXPECT_EQ(parent_path("/a"), "/");
    EXPECT_EQ(parent_path("/"), "/");
    EXPECT_EQ(base_name("/a/b"), "b");
    EXPECT_EQ(base_name("/a"), "a");
    EXPECT_EQ(base_name("b"), "b");
}

TEST(ZkcoPath, SequenceNumbers) {
    EXPECT_EQ(sequence_number("task-0000000042"), 42);
    EXPECT_EQ(sequence_number("/q/item-2147483647"), 2147483647);
    EXPECT_EQ(sequence_number("0000000000"), 0);
    EXPECT_FALSE(sequence_number("task-42"));
    EXPECT_FALSE(sequence_number("task-00000000x2"));
    EXPECT_FALSE(sequence_number("task-+000000042"));
    EXPECT_FALSE(sequence_number(""));
}

TEST(ZkcoConfig, ParsesConnectStrings) {
    auto one = parse_connect_string("127.0.0.1:2181");
    ASSERT_TRUE(one);
    ASSERT_EQ(one->servers.size(), 1U);
    EXPECT_EQ(one->servers[0], (server_address{"127.0.0.1", 2181}));
    EXPECT_EQ(one->chroot, "");

    auto many = parse_connect_string("a:1,b,[::1]:3,[fe80::1]/zkd/prod");
    ASSERT_TRUE(many);
    ASSERT_EQ(many->servers.size(), 4U);
    EXPECT_EQ(many->servers[0], (server_address{"a", 1}));
    EXPECT_EQ(many->servers[1], (server_address{"b", 2181}));
    EXPECT_EQ(many->servers[2], (server_address{"::1", 3}));
    EXPECT_EQ(many->servers[3], (server_address{"fe80::1", 2181}));
    EXPECT_EQ(many->chroot, "/zkd/prod");
    EXPECT_EQ(format_connect_string(*many), "a:1,b:2181,[::1]:3,[fe80::1]:2181/zkd/prod");

    auto root = parse_connect_string("h:1/");
    ASSERT_TRUE(root);
    EXPECT_EQ(root->chroot, "");

    for (const auto* bad :
         {"", "/chroot", ":1", "h:", "h:0", "h:65536", "h:12x", "::1:2181", "[::1", "[::1]x",
          "[::1]:", "h:1,", ",h:1", "h:1/bad/", "h:1//", "no port here!", "h st:1", "h@x:1",
          "[::1;]:1"}) {
        EXPECT_EQ(parse_connect_string(bad).error(), errc::bad_arguments) << bad;
    }
}

TEST(ZkcoAcl, DigestIdsMatchZooKeeper) {
    // base64(sha1("user:password")), as ZooKeeper's DigestAuthenticationProvider makes them.
    EXPECT_EQ(digest_id("alice", "secret"), "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=");
    EXPECT_EQ(digest_id("super", "superpw"), "super:g9oN2HttPfn8MMWJZ2r45Np/LIA=");
    EXPECT_EQ(open_acl(), (acl_list{{perms::all, "world", "anyone"}}));
    EXPECT_EQ(creator_all_acl(), (acl_list{{perms::all, "auth", ""}}));
    EXPECT_EQ(read_acl().front().perms, perms::read);
}

TEST(ZkcoMulti, SizesAndFailedOp) {
    const multi_op small = op::check{"/a", 1};
    const multi_op big = op::create{"/a", std::string(1000, 'x'), create_mode::persistent, {}};
    EXPECT_GT(estimated_size(small), 2U);
    EXPECT_GT(estimated_size(big), 1000U);
    EXPECT_GT(estimated_size(op::set{"/abc", std::string(500, 'y'), 0}), 500U);

    multi_result r;
    EXPECT_TRUE(r);
    EXPECT_FALSE(r.failed_op());
    r.ec = errc::bad_version;
    r.results = {
        {errc::runtime_inconsistency, {}, {}},
        {errc::bad_version, {}, {}},
        {errc::runtime_inconsistency, {}, {}}};
    EXPECT_FALSE(r);
    EXPECT_EQ(r.failed_op(), 1U);
}

TEST(ZkcoTypes, Names) {
    EXPECT_EQ(to_string(session_state::disconnected), "disconnected");
    EXPECT_EQ(to_string(event_type::child), "child");
    EXPECT_TRUE(is_terminal(session_state::expired));
    EXPECT_TRUE(is_terminal(session_state::closed));
    EXPECT_FALSE(is_terminal(session_state::disconnected));
    EXPECT_TRUE(is_sequential(create_mode::ephemeral_sequential));
    EXPECT_FALSE(is_sequential(create_mode::container));
    EXPECT_TRUE(is_ttl(create_mode::persistent_sequential_with_ttl));
    EXPECT_FALSE(is_ttl(create_mode::persistent));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
