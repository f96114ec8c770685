// SPDX-License-Identifier: MIT
#include "reactor/lag_probe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using std::chrono::nanoseconds;
using zkd::reactor::lag_probe;
using zkd::reactor::parse_schedstat;
using zkd::reactor::percentile_99_and_max;

TEST(ReactorLagProbe, ParsesSchedstat) {
    const auto s = parse_schedstat("172898719 3585506715 2056\n");
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->on_cpu, nanoseconds(172898719));
    EXPECT_EQ(s->waited, nanoseconds(3585506715));
    EXPECT_TRUE(parse_schedstat("0 0 0").has_value());
    EXPECT_TRUE(parse_schedstat("5 6").has_value());  // the third number is not needed

    EXPECT_FALSE(parse_schedstat(""));
    EXPECT_FALSE(parse_schedstat("12"));  // no wait
    EXPECT_FALSE(parse_schedstat("12 "));
    EXPECT_FALSE(parse_schedstat("x 1 2"));
    EXPECT_FALSE(parse_schedstat("1x 2 3"));
    EXPECT_FALSE(parse_schedstat("1 2x 3"));
    EXPECT_TRUE(parse_schedstat("1 2\n").has_value());
    EXPECT_FALSE(parse_schedstat("-1 2 3"));
    EXPECT_FALSE(parse_schedstat("99999999999999999999999 2 3"));  // overflow
}

TEST(ReactorLagProbe, Percentile99AndMax) {
    std::vector<std::int64_t> none;
    EXPECT_EQ(percentile_99_and_max(none).p99, 0);
    EXPECT_EQ(percentile_99_and_max(none).max, 0);

    std::vector<std::int64_t> one{7};
    EXPECT_EQ(percentile_99_and_max(one).p99, 7);
    EXPECT_EQ(percentile_99_and_max(one).max, 7);

    std::vector<std::int64_t> hundred;
    for (std::int64_t i = 100; i >= 1; --i) {
        hundred.push_back(i);
    }
    const auto h = percentile_99_and_max(hundred);
    EXPECT_EQ(h.p99, 99);
    EXPECT_EQ(h.max, 100);

    // 600 samples (the default window): 594 (99%) are at most the p99, so 6 outliers are
    // above it and a 7th is it.
    std::vector<std::int64_t> window(600, 1);
    for (std::int64_t i = 0; i < 6; ++i) {
        window[static_cast<std::size_t>(i * 100)] = 1000 + i;
    }
    auto six = window;
    EXPECT_EQ(percentile_99_and_max(six).p99, 1);
    EXPECT_EQ(percentile_99_and_max(six).max, 1005);
    window[599] = 999;
    const auto w = percentile_99_and_max(window);
    EXPECT_EQ(w.p99, 999);
    EXPECT_EQ(w.max, 1005);
}

bool kernel_reports_run_queue_wait() {
    std::ifstream f("/proc/thread-self/schedstat");
    std::string line;
    return std::getline(f, line) && parse_schedstat(line).has_value();
}

std::chrono::nanoseconds thread_cpu_now() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::chrono::seconds(ts.tv_sec) + nanoseconds(ts.tv_nsec);
}

// A handler that holds the loop's thread on a CPU shows in the lag and in the thread's time
// on a CPU, which counts all of it.
TEST(ReactorLagProbe, AHandlerHoldingTheLoopShowsInItsTimeOnACpu) {
    if (!kernel_reports_run_queue_wait()) {
        GTEST_SKIP() << "no /proc/thread-self/schedstat here";
    }
    asio::io_context ioc(1);
    lag_probe probe(ioc.get_executor(), 5ms, 100);
    probe.start();
    bool spun = false;
    nanoseconds cpu_before{};
    std::function<void()> check = [&] {
        const auto s = probe.stats();
        if (!spun && s.samples >= 3) {
            cpu_before = s.cpu_total;
            // 60 ms of this thread's CPU time: the probe's next due time (at most 5 ms away)
            // passes meanwhile.
            const auto until = thread_cpu_now() + 60ms;
            while (thread_cpu_now() < until) {
            }
            spun = true;
        }
        if (spun && s.samples >= 8) {
            probe.stop();
            return;
        }
        asio::post(ioc, check);
    };
    asio::post(ioc, check);
    ioc.run_for(30s);

    const auto s = probe.stats();
    ASSERT_TRUE(spun);
    EXPECT_TRUE(s.sched_known);
    EXPECT_GE(s.cpu_total - cpu_before, 60ms);
    EXPECT_GE(s.max, 55ms);  // the sample due during it ran after it
    EXPECT_GE(s.cpu_wait_total.count(), 0);
}

// Before the first sample (its io_context never ran), nothing is claimed.
TEST(ReactorLagProbe, NoSchedulerCountersBeforeTheFirstSample) {
    asio::io_context ioc(1);
    const lag_probe probe(ioc.get_executor(), 100ms, 10);
    const auto s = probe.stats();
    EXPECT_FALSE(s.sched_known);
    EXPECT_EQ(s.samples, 0U);
    EXPECT_EQ(s.cpu_total, 0ns);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
