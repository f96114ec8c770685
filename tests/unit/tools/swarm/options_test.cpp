// SPDX-License-Identifier: MIT
// zkd-swarm's command line.
#include "swarm/options.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::swarm;
using namespace std::chrono_literals;

namespace {

settings parse(
    const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}
) {
    return parse_args(
               args,
               [env](const char* name) -> std::optional<std::string> {
                   if (auto it = env.find(name); it != env.end()) {
                       return it->second;
                   }
                   return std::nullopt;
               }
    ).s;
}

}  // namespace

TEST(SwarmOptions, Defaults) {
    const auto s = parse({});
    EXPECT_EQ(s.zk, "127.0.0.1:2181");
    EXPECT_EQ(s.ns, "default");
    EXPECT_EQ(s.workers, 100U);
    EXPECT_EQ(s.capacity, 4);
    EXPECT_EQ(s.threads, 1);
    EXPECT_EQ(s.task_ms, 0ms);
    EXPECT_EQ(s.connect_rate, 200.0);
    EXPECT_FALSE(s.duration);
    EXPECT_FALSE(s.json);
}

TEST(SwarmOptions, ReadsEveryOptionAndTheEnvironment) {
    const auto s = parse(
        {"--workers=1000", "--capacity", "8", "--threads", "2", "--task-ms", "5", "--task-jitter",
         "1s", "--connect-rate", "50.5", "--session-timeout", "4s", "--duration", "2m", "--host",
         "h", "--json"},
        {{"ZKD_ZK", "10.0.0.1:2181/x"}, {"ZKD_NAMESPACE", "prod"}}
    );
    EXPECT_EQ(s.zk, "10.0.0.1:2181/x");
    EXPECT_EQ(s.ns, "prod");
    EXPECT_EQ(s.workers, 1000U);
    EXPECT_EQ(s.capacity, 8);
    EXPECT_EQ(s.threads, 2);
    EXPECT_EQ(s.task_ms, 5ms);
    EXPECT_EQ(s.task_jitter, 1000ms);
    EXPECT_EQ(s.connect_rate, 50.5);
    EXPECT_EQ(s.session_timeout, 4000ms);
    EXPECT_EQ(s.duration, std::chrono::milliseconds(120'000));
    EXPECT_EQ(s.host, "h");
    EXPECT_TRUE(s.json);
    EXPECT_EQ(parse({"--zk", "a:1", "--namespace", "n"}, {{"ZKD_ZK", "b:2"}}).zk, "a:1");
}

TEST(SwarmOptions, RefusesBadValues) {
    for (const auto& bad : std::vector<std::vector<std::string>>{
             {"--workers", "0"},
             {"--workers", "x"},
             {"--capacity", "0"},
             {"--connect-rate", "0"},
             {"--connect-rate", "nan"},
             {"--session-timeout", "10ms"},
             {"--namespace", "a/b"},
             {"--zk", ""},
             {"--json=yes"},
             {"--workers"},
             {"--bogus"},
             {"stray"},
             {"--workers", "1", "--workers", "2"},
         }) {
        EXPECT_THROW(parse(bad), usage_error) << bad.front();
    }
    // --help wins over everything else on the line.
    EXPECT_TRUE(parse_args({"--help", "--workers", "0"}, [](const char*) {
                    return std::optional<std::string>();
                }).help);
}

}  // namespace ZKD_UNITY_ID
