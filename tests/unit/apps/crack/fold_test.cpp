// SPDX-License-Identifier: MIT
// The crack job's pure parts, without a server: the plan (job id, partition count, partition
// tasks) and the fold of partition results into the job node (apply, settle).
#include "apps/crack/fold.hpp"

#include "apps/crack/md5_crack.hpp"
#include "apps/crack/plan.hpp"
#include "protocol/ids.hpp"
#include "protocol/task.hpp"
#include "roles/client/task_client.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace json = boost::json;
using namespace zkd::crack;
using zkd::protocol::task_error;
using zkd::protocol::task_result;
using zkd::protocol::task_state;

constexpr std::int64_t t0 = 1'700'000'000'000;

/// A running job of `n` open partitions over md5("ab"), with task ids of its own.
crack_job running_job(std::size_t n) {
    zkd::protocol::task_id_generator ids;
    crack_job j;
    j.hash = md5_hex("ab");
    j.spec = json::object{{"charset", "ab"}, {"min_len", 1}, {"max_len", 2}};
    j.size = 6;
    for (std::size_t i = 0; i < n; ++i) {
        j.tasks.push_back(ids.next(5, t0));
    }
    j.partitions.assign(n, crack_partition::open);
    j.created_ms = t0;
    return j;
}

std::string succeeded(const json::value& value) {
    task_result r;
    r.task = "t";
    r.state = task_state::succeeded;
    r.value = value;
    return zkd::protocol::encode(r);
}

std::string ended(task_state state, std::string code, std::string message) {
    task_result r;
    r.task = "t";
    r.state = state;
    r.error = task_error{std::move(code), std::move(message)};
    return zkd::protocol::encode(r);
}

partition_report report(const crack_job& j, std::size_t i, std::optional<std::string> data) {
    return partition_report{i, j.tasks[i], std::move(data)};
}

json::object not_found(std::int64_t tried) {
    return json::object{{"found", false}, {"tried", tried}};
}

json::object found(const std::string& preimage, std::int64_t tried) {
    return json::object{{"found", true}, {"preimage", preimage}, {"tried", tried}};
}

TEST(CrackFold, ASearchedPartitionCountsItsCandidatesOnce) {
    auto j = running_job(3);
    EXPECT_TRUE(apply(j, report(j, 1, succeeded(not_found(2))), t0));
    EXPECT_EQ(j.partitions, "-n-");
    EXPECT_EQ(j.tried, 2U);
    EXPECT_EQ(j.done(), 1);
    EXPECT_EQ(j.state, crack_state::running);
    // The same result again (another participant read it too) changes nothing.
    EXPECT_FALSE(apply(j, report(j, 1, succeeded(not_found(2))), t0));
    EXPECT_EQ(j.tried, 2U);
}

TEST(CrackFold, ReportsOfOtherTasksOrPartitionsAreIgnored) {
    auto j = running_job(2);
    const auto before = j;
    // An older task of partition 0 (it was resubmitted since).
    EXPECT_FALSE(apply(
        j, partition_report{0, "t5-0000000000000-00000000-00000000", succeeded(not_found(1))}, t0
    ));
    EXPECT_FALSE(apply(j, partition_report{2, j.tasks[0], succeeded(not_found(1))}, t0));
    EXPECT_EQ(j, before);
}

TEST(CrackFold, TheFirstFindEndsTheJobWithItsPreimage) {
    auto j = running_job(3);
    ASSERT_TRUE(apply(j, report(j, 2, succeeded(found("ab", 4))), t0 + 5));
    EXPECT_EQ(j.state, crack_state::found);
    EXPECT_EQ(j.preimage, "ab");
    EXPECT_EQ(j.found_partition, 2);
    EXPECT_EQ(j.finished_ms, t0 + 5);
    EXPECT_EQ(j.partitions, "--f");
    EXPECT_EQ(j.tried, 4U);
    // A later find (say md5 collides) is counted but does not replace the first.
    ASSERT_TRUE(apply(j, report(j, 0, succeeded(found("ab", 1))), t0 + 9));
    EXPECT_EQ(j.found_partition, 2);
    EXPECT_EQ(j.finished_ms, t0 + 5);
    EXPECT_EQ(j.partitions, "f-f");
    // After the find, cancelled partitions are 'c', not failures.
    ASSERT_TRUE(apply(j, report(j, 1, ended(task_state::cancelled, "cancelled", "by a client")), t0)
    );
    EXPECT_EQ(j.partitions, "fcf");
    EXPECT_TRUE(j.failed.empty());
    EXPECT_FALSE(settle(j, t0 + 10)) << "a found job is terminal already";
}

TEST(CrackFold, AValueThatDoesNotHoldUpFailsThePartition) {
    auto j = running_job(5);
    ASSERT_TRUE(apply(j, report(j, 0, succeeded(found("zz", 1))), t0));  // md5("zz") is not it
    ASSERT_TRUE(apply(j, report(j, 1, succeeded(json::object{{"found", true}, {"tried", 1}})), t0));
    ASSERT_TRUE(apply(j, report(j, 2, succeeded(json::object{{"found", false}})), t0));
    ASSERT_TRUE(apply(j, report(j, 3, succeeded(not_found(-1))), t0));
    ASSERT_TRUE(apply(j, report(j, 4, succeeded(json::value("done"))), t0));
    EXPECT_EQ(j.partitions, "xxxxx");
    EXPECT_EQ(j.state, crack_state::running);
    EXPECT_EQ(j.tried, 0U);
    ASSERT_EQ(j.failed.size(), 5U);
    for (const auto& f : j.failed) {
        EXPECT_EQ(f.code, "bad_value") << f.partition;
        EXPECT_EQ(f.state, task_state::succeeded);
        EXPECT_EQ(f.task, j.tasks[static_cast<std::size_t>(f.partition)]);
    }
}

TEST(CrackFold, FailuresGarbageAndVanishedTasksAreListedByPartition) {
    auto j = running_job(4);
    ASSERT_TRUE(apply(j, report(j, 3, ended(task_state::failed, "handler_error", "boom")), t0));
    ASSERT_TRUE(apply(j, report(j, 1, std::nullopt), t0));
    ASSERT_TRUE(apply(j, report(j, 2, std::string("{not json")), t0));
    ASSERT_TRUE(apply(j, report(j, 0, ended(task_state::cancelled, "cancelled", "by hand")), t0));
    EXPECT_EQ(j.partitions, "xxxx");
    ASSERT_EQ(j.failed.size(), 4U);
    EXPECT_EQ(j.failed[0].partition, 0);  // sorted by partition, whatever the order of arrival
    EXPECT_EQ(j.failed[0].state, task_state::cancelled);  // cancelled before any find
    EXPECT_EQ(j.failed[1].code, "vanished");
    EXPECT_EQ(j.failed[1].state, task_state::unknown);
    EXPECT_EQ(j.failed[2].code, "garbage_result");
    EXPECT_EQ(j.failed[3].code, "handler_error");
    EXPECT_EQ(j.failed[3].message, "boom");
    EXPECT_EQ(j.failed[3].state, task_state::failed);
}

TEST(CrackFold, SettleEndsARunningJobOnceEveryPartitionIsAccountedFor) {
    auto j = running_job(2);
    EXPECT_FALSE(settle(j, t0));
    ASSERT_TRUE(apply(j, report(j, 0, succeeded(not_found(3))), t0));
    EXPECT_FALSE(settle(j, t0)) << "partition 1 is open";
    ASSERT_TRUE(apply(j, report(j, 1, succeeded(not_found(3))), t0));
    ASSERT_TRUE(settle(j, t0 + 7));
    EXPECT_EQ(j.state, crack_state::not_found);
    EXPECT_EQ(j.finished_ms, t0 + 7);
    EXPECT_EQ(j.tried, 6U);
    EXPECT_FALSE(settle(j, t0 + 8));
    EXPECT_EQ(j.finished_ms, t0 + 7);

    auto k = running_job(2);
    ASSERT_TRUE(apply(k, report(k, 0, succeeded(not_found(3))), t0));
    ASSERT_TRUE(apply(k, report(k, 1, ended(task_state::timed_out, "timeout", "too slow")), t0));
    ASSERT_TRUE(settle(k, t0));
    EXPECT_EQ(k.state, crack_state::failed);
}

crack_spec brute(std::string charset, int max_len) {
    crack_spec s;
    s.hash = md5_hex("ab");
    s.charset = std::move(charset);
    s.max_len = max_len;
    return s;
}

TEST(CrackPlan, ABruteForcePlanCoversItsKeyspace) {
    auto spec = brute("ab", 2);
    spec.hash = "E2FC714C4727EE9395F324CD2E7F331F";  // any case
    const auto p = make_plan(spec);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_EQ(p->hash, md5_hex("abcd"));
    EXPECT_FALSE(p->words_mode);
    EXPECT_EQ(p->size, 6U);  // a b aa ab ba bb
    EXPECT_EQ(p->canonical, (json::object{{"charset", "ab"}, {"min_len", 1}, {"max_len", 2}}));
    EXPECT_EQ(p->job_id, crack_job_id(spec).value());
    EXPECT_EQ(p->job_id.rfind("crack-" + p->hash + "-", 0), 0U);
    const auto args = partition_args(*p, {2, 3});
    EXPECT_EQ(
        args, (json::object{
                  {"hash", p->hash},
                  {"charset", "ab"},
                  {"min_len", 1},
                  {"max_len", 2},
                  {"start", 2},
                  {"count", 3}})
    );
}

TEST(CrackPlan, AWordListPlanCarriesItsWords) {
    crack_spec spec;
    spec.hash = md5_hex("beta");
    spec.words = std::vector<std::string>{"alpha", "beta", "gamma"};
    const auto p = make_plan(spec);
    ASSERT_TRUE(p) << p.error().message();
    EXPECT_TRUE(p->words_mode);
    EXPECT_EQ(p->size, 3U);
    EXPECT_EQ(p->canonical.at("words"), 3);
    EXPECT_EQ(p->canonical.at("words_sha1").as_string().size(), 40U);
    EXPECT_EQ(
        partition_args(*p, {1, 2}),
        (json::object{{"hash", p->hash}, {"words", json::array{"beta", "gamma"}}})
    );
    spec.words->push_back("\xff");
    EXPECT_EQ(make_plan(spec).error(), crack_errc::bad_word);
}

TEST(CrackPlan, PartitionCountFollowsTheRequestTheWorkersAndTheSpace) {
    auto big = make_plan(brute("abcdefghijklmnopqrstuvwxyz", 6)).value();  // 321,272,406
    EXPECT_EQ(partition_count(big, 7, 100), 7U);                           // as asked
    EXPECT_EQ(partition_count(big, 0, 0), static_cast<std::uint64_t>(default_crack_partitions));
    EXPECT_EQ(partition_count(big, 0, 50), 200U);  // 4 per slot
    EXPECT_EQ(partition_count(big, 0, 10'000), static_cast<std::uint64_t>(max_crack_partitions));
    auto small = make_plan(brute("ab", 2)).value();  // 6 candidates
    EXPECT_EQ(partition_count(small, 0, 50), 1U);    // one per 65,536 candidates at least
    EXPECT_EQ(partition_count(small, 900, 0), 6U);   // never more than one per candidate
    // A keyspace of more than 2^40 candidates needs at least one partition per 2^40.
    auto huge = make_plan(brute("abcdefghijklmnopqrstuvwxyz0123456789", 9)).value();
    EXPECT_GE(partition_count(huge, 1, 0) * max_partition_count, huge.size);
}

TEST(CrackPlan, APartitionTaskIsAValidPendingNode) {
    const auto spec = brute("ab", 2);
    const auto p = make_plan(spec).value();
    const zkd::protocol::layout l;
    const std::string tid = zkd::protocol::task_id_generator().next(spec.priority, t0);
    const auto task = partition_task(p, spec, {0, 6});
    EXPECT_EQ(task.type, md5_crack_type);
    EXPECT_EQ(task.args, partition_args(p, {0, 6}));
    EXPECT_EQ(task.priority, spec.priority);
    EXPECT_EQ(task.max_attempts, spec.max_attempts);
    EXPECT_EQ(task.timeout, spec.partition_timeout);
    // As the job's transaction carries it (the client API's task_transaction).
    zkd::roles::task_transaction txn(l, "0000abcd", t0);
    ASSERT_TRUE(txn.add_task(tid, task));
    const auto ops = txn.ops();
    ASSERT_EQ(ops.size(), 2U);  // the create and its shard's change log
    const auto* create = std::get_if<zkd::zkco::op::create>(&ops[0]);
    ASSERT_NE(create, nullptr);
    EXPECT_EQ(create->path, l.pending_task(tid));
    const auto node = zkd::protocol::decode_task_node(create->data);
    ASSERT_TRUE(node) << node.error().message;
    EXPECT_EQ(node->task.args, task.args);
    EXPECT_EQ(node->task.client, "0000abcd");
    EXPECT_TRUE(fits_one_multi(ops));
    EXPECT_FALSE(fits_one_multi(std::vector<zkd::zkco::multi_op>(1001, ops[0])));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
