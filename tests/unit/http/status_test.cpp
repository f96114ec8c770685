// SPDX-License-Identifier: MIT
// The status page's pure parts (src/http/status, status_page, the routes in api): the
// history behind the charts, quantiles from histogram deltas, the queue by priority, the
// failures kept, and which files are public.
#include "http/status.hpp"

#include "http/api.hpp"
#include "http/status_page.hpp"
#include "protocol/ids.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace json = boost::json;
using namespace zkd::http;

namespace {

zkd::protocol::task_result result(zkd::protocol::task_state s, std::int64_t finished_ms) {
    zkd::protocol::task_result r;
    r.state = s;
    r.finished_ms = finished_ms;
    r.worker = "w1";
    r.attempt = 1;
    if (s != zkd::protocol::task_state::succeeded) {
        r.error = zkd::protocol::task_error{"handler_error", "boom"};
    }
    return r;
}

}  // namespace

TEST(HttpStatus, HistoryGivesRatesPerIntervalAndKeepsTheLastSamples) {
    status_history h(3);
    zkd::roles::node_stats s;
    s.master = true;
    s.queue_depth = 7;
    h.record(1'000, s);
    s.master_totals.assigned = 10;
    s.succeeded = 4;
    s.failed = 2;
    s.queue_depth = 3;
    for (int i = 0; i < 10; ++i) {
        s.assign_latency.observe(3);  // the (2, 5] bucket
    }
    h.record(3'000, s);
    auto v = h.to_json();
    const auto& iv = v.at("intervals").as_array();
    ASSERT_EQ(iv.size(), 1U);
    const auto& i = iv[0].as_object();
    EXPECT_EQ(i.at("t").as_int64(), 3'000);
    EXPECT_DOUBLE_EQ(i.at("seconds").as_double(), 2.0);
    EXPECT_DOUBLE_EQ(i.at("assigned").as_double(), 5.0);
    EXPECT_DOUBLE_EQ(i.at("succeeded").as_double(), 2.0);
    EXPECT_DOUBLE_EQ(i.at("failed").as_double(), 1.0);
    EXPECT_EQ(i.at("queue_depth").as_int64(), 3);
    const double p50 = i.at("assign_p50_ms").as_double();
    EXPECT_GT(p50, 2.0);
    EXPECT_LE(p50, 5.0);

    // No new assignments: no latency in that interval; not master: no queue depth.
    s.master = false;
    s.queue_depth = -1;
    h.record(4'000, s);
    h.record(5'000, s);
    EXPECT_EQ(h.size(), 3U);  // the first sample is gone
    v = h.to_json();
    const auto& later = v.at("intervals").as_array();
    ASSERT_EQ(later.size(), 2U);
    EXPECT_EQ(later[0].at("t").as_int64(), 4'000);
    EXPECT_TRUE(later[1].at("assign_p99_ms").is_null());
    EXPECT_TRUE(later[1].at("queue_depth").is_null());
    EXPECT_DOUBLE_EQ(later[1].at("assigned").as_double(), 0.0);
}

TEST(HttpStatus, QuantilesInterpolateWithinTheBucketLikePrometheus) {
    zkd::roles::latency_histogram h;
    EXPECT_FALSE(histogram_quantile(0.5, h));
    for (int i = 0; i < 100; ++i) {
        h.observe(i < 50 ? 0.7 : 40);  // 50 in (0.5, 1], 50 in (25, 50]
    }
    EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, h), 1.0);
    EXPECT_DOUBLE_EQ(*histogram_quantile(0.25, h), 0.75);
    EXPECT_DOUBLE_EQ(*histogram_quantile(1.0, h), 50.0);
    zkd::roles::latency_histogram slow;
    slow.observe(1e9);  // only in +Inf: the largest finite bound
    EXPECT_DOUBLE_EQ(*histogram_quantile(0.99, slow), 10'000.0);

    auto later = h;
    later.observe(3);
    const auto d = histogram_delta(later, h);
    EXPECT_EQ(d.count(), 1U);
    EXPECT_DOUBLE_EQ(*histogram_quantile(0.5, d), 3.5);  // the middle of (2, 5]
    EXPECT_EQ(histogram_delta(h, later).count(), 0U);    // never negative
}

TEST(HttpStatus, QueueByPriorityFromTaskNames) {
    zkd::protocol::task_id_generator ids(0x1234, 0);
    std::vector<std::string> names{
        ids.next(9, 1'700'000'000'000), ids.next(9, 1'700'000'000'001),
        ids.next(0, 1'700'000'000'002), "garbage",
        zkd::protocol::bundle_id(ids.next(5, 1'700'000'000'003), 4)};
    const auto counts = count_by_priority(names);
    EXPECT_EQ(counts[9], 2U);
    EXPECT_EQ(counts[0], 1U);
    EXPECT_EQ(counts[5], 4U);  // a bundle counts its tasks
    EXPECT_EQ(
        counts[1] + counts[2] + counts[3] + counts[4] + counts[6] + counts[7] + counts[8], 0U
    );
}

TEST(HttpStatus, NewResultsAreTheUnseenOnesNewestFirst) {
    zkd::protocol::task_id_generator ids(0x1234, 0);
    const auto old = ids.next(5, 1'700'000'000'000);
    const auto newer = ids.next(5, 1'700'000'100'000);
    const auto urgent_older = ids.next(9, 1'700'000'050'000);
    std::vector<std::string> before{old};
    std::vector<std::string> now{old, newer, urgent_older};
    std::sort(now.begin(), now.end());
    EXPECT_EQ(new_results(before, now, 10), (std::vector<std::string>{newer, urgent_older}));
    EXPECT_EQ(new_results(before, now, 1), (std::vector<std::string>{newer}));
    EXPECT_TRUE(new_results(now, now, 10).empty());
}

TEST(HttpStatus, FailureLogKeepsFailuresNewestFirstOnce) {
    failure_log log(2);
    using zkd::protocol::task_state;
    log.add("a", result(task_state::succeeded, 10));  // not a failure
    log.add("b", result(task_state::failed, 20));
    log.add("c", result(task_state::lost, 40));
    log.add("b", result(task_state::failed, 20));     // known
    log.add("d", result(task_state::timed_out, 30));  // between: c, d; b drops
    ASSERT_EQ(log.entries().size(), 2U);
    EXPECT_EQ(log.entries()[0].id, "c");
    EXPECT_EQ(log.entries()[1].id, "d");
    const auto v = log.to_json();
    EXPECT_EQ(v.at(0).at("state").as_string(), "lost");
    EXPECT_EQ(v.at(1).at("error").at("message").as_string(), "boom");
    EXPECT_EQ(v.at(1).at("worker").as_string(), "w1");
}

TEST(HttpStatus, NodeJsonNamesTheRole) {
    zkd::roles::node_stats s;
    s.member = "alpha-1";
    s.master = true;
    s.epoch = 4;
    s.queue_depth = 2;
    s.master_totals.lost = 1;
    const auto v = node_json(s);
    EXPECT_EQ(v.at("member").as_string(), "alpha-1");
    EXPECT_EQ(v.at("epoch").as_int64(), 4);
    EXPECT_EQ(v.at("queue_depth").as_int64(), 2);
    EXPECT_EQ(v.at("master_totals").at("lost").as_uint64(), 1U);
    s.queue_depth = -1;
    EXPECT_TRUE(node_json(s).at("queue_depth").is_null());
}

TEST(HttpStatus, NodeJsonCountsRetriesApartAndShowsTheMastersViews) {
    zkd::roles::node_stats s;
    s.queue_depth = 0;  // master
    s.failed = 1;
    s.worker.retried = 2;
    s.master_totals.delayed = 5;
    s.master_totals.delayed_next_due_ms = 1'700'000'000'000;
    s.master_totals.released = 9;
    s.schedules.schedules = 3;
    s.schedules.paused = 1;
    s.schedules.fired = 8;
    s.schedules.late = 1;
    s.schedules.last_lateness_ms = 12;
    s.workflows.workflows = {1, 2, 0, 1};
    s.workflows.steps = {0, 1, 6, 0, 0, 2};
    const auto v = node_json(s);
    EXPECT_EQ(v.at("worker").at("failed").as_uint64(), 1U);
    const auto& j = v.at("jobs");
    EXPECT_EQ(j.at("retried").as_uint64(), 2U);
    EXPECT_EQ(j.at("delayed").as_uint64(), 5U);
    EXPECT_EQ(j.at("delayed_next_due_ms").as_int64(), 1'700'000'000'000);
    EXPECT_EQ(j.at("released").as_uint64(), 9U);
    EXPECT_EQ(j.at("schedules").at("count").as_uint64(), 3U);
    EXPECT_EQ(j.at("schedules").at("paused").as_uint64(), 1U);
    EXPECT_EQ(j.at("schedules").at("fired").as_uint64(), 8U);
    EXPECT_EQ(j.at("schedules").at("late").as_uint64(), 1U);
    EXPECT_EQ(j.at("schedules").at("last_lateness_ms").as_int64(), 12);
    EXPECT_EQ(j.at("workflows").at("by_state").at("running").as_uint64(), 1U);
    EXPECT_EQ(j.at("workflows").at("by_state").at("succeeded").as_uint64(), 2U);
    EXPECT_EQ(j.at("workflows").at("by_state").at("cancelled").as_uint64(), 1U);
    EXPECT_EQ(j.at("workflows").at("steps").at("succeeded").as_uint64(), 6U);
    EXPECT_EQ(j.at("workflows").at("steps").at("cancelled").as_uint64(), 2U);
    // Not master: the master's views are null, the counters stay.
    s.queue_depth = -1;
    const auto w = jobs_json(s);
    EXPECT_TRUE(w.at("delayed").is_null());
    EXPECT_TRUE(w.at("delayed_next_due_ms").is_null());
    EXPECT_TRUE(w.at("schedules").at("count").is_null());
    EXPECT_TRUE(w.at("schedules").at("last_lateness_ms").is_null());
    EXPECT_TRUE(w.at("workflows").at("by_state").is_null());
    EXPECT_EQ(w.at("schedules").at("fired").as_uint64(), 8U);
    EXPECT_EQ(w.at("retried").as_uint64(), 2U);
}

TEST(HttpStatus, EarliestIdTimeOfDelayedNames) {
    zkd::protocol::task_id_generator ids(0x1234, 0);
    const auto later = ids.next(9, 1'700'000'900'000);
    const auto sooner = ids.next(0, 1'700'000'100'000);  // a lower priority does not matter
    EXPECT_EQ(earliest_id_time({later, "garbage", sooner}), 1'700'000'100'000);
    EXPECT_FALSE(earliest_id_time({"garbage"}).has_value());
    EXPECT_FALSE(earliest_id_time({}).has_value());
}

TEST(HttpStatus, OnlyThePagesStaticFilesArePublic) {
    EXPECT_EQ(match_route("/").what, resource::page);
    EXPECT_EQ(match_route("/ui/status.js").what, resource::page);
    EXPECT_EQ(match_route("/v1/status").what, resource::status);
    EXPECT_TRUE(is_public(resource::page));
    for (const auto r :
         {resource::tasks, resource::task, resource::cluster, resource::metrics, resource::status,
          resource::none}) {
        EXPECT_FALSE(is_public(r));
    }
    EXPECT_EQ(allowed_methods(resource::status), "GET, HEAD");
    EXPECT_EQ(allowed_methods(resource::page), "GET, HEAD");
}

TEST(HttpStatus, ThePageFilesAreCompiledIn) {
    const auto* index = find_page_file("/");
    ASSERT_NE(index, nullptr);
    EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
    EXPECT_NE(index->body.find("/ui/status.js"), std::string_view::npos);
    const auto* js = find_page_file("/ui/status.js");
    ASSERT_NE(js, nullptr);
    EXPECT_NE(js->body.find("/v1/status"), std::string_view::npos);
    EXPECT_NE(js->body.find("Authorization"), std::string_view::npos);
    ASSERT_NE(find_page_file("/ui/status.css"), nullptr);
    EXPECT_EQ(find_page_file("/ui/nothing.js"), nullptr);
    EXPECT_EQ(find_page_file("/index.html"), nullptr);
    // Nothing from elsewhere: no absolute URLs to fetch from.
    for (const auto* f : {index, js, find_page_file("/ui/status.css")}) {
        EXPECT_EQ(f->body.find("https://"), std::string_view::npos) << f->path;
        EXPECT_EQ(f->body.find("//cdn"), std::string_view::npos) << f->path;
    }
}

}  // namespace ZKD_UNITY_ID
