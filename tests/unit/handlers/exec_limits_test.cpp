// SPDX-License-Identifier: MIT
// Exec types' resource limits without processes: the settings and their errors, how each
// limit is enforced given what cgroup v2 offers, the start-up line, and how the end of a run
// (exit status, CPU time, cgroup events, stderr) becomes a limit's code.
#include "handlers/exec.hpp"
#include "protocol/task.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <map>
#include <stdexcept>
#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::handlers::exec;
using namespace std::chrono_literals;
namespace codes = zkd::protocol::codes;

namespace {

program_config with(std::initializer_list<std::pair<std::string, std::string>> settings) {
    std::map<std::string, program_config> types;
    apply_setting(types, "t", "/bin/true");
    for (const auto& [k, v] : settings) {
        apply_setting(types, "t." + k, v);
    }
    return types.at("t");
}

std::string refusal(const std::string& setting, const std::string& value) {
    try {
        (void)with({{setting, value}});
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "accepted";
}

TEST(ExecLimitsConfig, ParsesEachLimit) {
    const auto c = with(
        {{"memory-limit", "64M"},
         {"cpu-limit", "2s"},
         {"max-processes", "10"},
         {"max-open-files", "32"}}
    );
    EXPECT_EQ(c.limits.memory, std::size_t{64} * 1024 * 1024);
    EXPECT_EQ(c.limits.cpu_time, 2s);
    EXPECT_EQ(c.limits.cpu_percent, 0);
    EXPECT_EQ(c.limits.max_processes, 10);
    EXPECT_EQ(c.limits.max_open_files, 32);
    EXPECT_TRUE(c.limits.any());
    EXPECT_FALSE(with({}).limits.any());

    EXPECT_EQ(with({{"memory-limit", "2GiB"}}).limits.memory, std::size_t{2} << 30);
    EXPECT_EQ(with({{"cpu-limit", "50%"}}).limits.cpu_percent, 50);
    EXPECT_EQ(with({{"cpu-limit", "50%"}}).limits.cpu_time, 0ms);
    const auto both = with({{"cpu-limit", "1m30s, 250%"}});
    EXPECT_EQ(both.limits.cpu_time, 90s);
    EXPECT_EQ(both.limits.cpu_percent, 250);
    EXPECT_EQ(with({{"cpu-limit", "500ms"}}).limits.cpu_time, 500ms);
    // A later line replaces the whole limit.
    std::map<std::string, program_config> types;
    apply_setting(types, "t.cpu-limit", "10s,50%");
    apply_setting(types, "t.cpu-limit", "20%");
    EXPECT_EQ(types.at("t").limits.cpu_time, 0ms);
    EXPECT_EQ(types.at("t").limits.cpu_percent, 20);
}

TEST(ExecLimitsConfig, RefusesBadValuesSayingWhatItWants) {
    EXPECT_NE(
        refusal("memory-limit", "lots").find("exec.t.memory-limit wants a size"), std::string::npos
    );
    EXPECT_NE(refusal("memory-limit", "512K").find("at least 1MiB"), std::string::npos);
    EXPECT_NE(refusal("memory-limit", "0").find("at least 1MiB"), std::string::npos);
    for (const auto* bad :
         {"30", "0.5", "", "30s,", "50%,60%", "1s,2s", "0%", "100001%", "x%", "0s", "-1s",
          "fast"}) {
        const auto why = refusal("cpu-limit", bad);
        EXPECT_NE(why.find("exec.t.cpu-limit wants a CPU time with its unit"), std::string::npos)
            << bad << ": " << why;
    }
    EXPECT_NE(refusal("max-processes", "0").find("from 1 to 1000000"), std::string::npos);
    EXPECT_NE(refusal("max-processes", "-3").find("from 1 to 1000000"), std::string::npos);
    EXPECT_NE(refusal("max-open-files", "3").find("from 4 to 1048576"), std::string::npos);
    EXPECT_NE(refusal("max-open-files", "10k").find("from 4 to 1048576"), std::string::npos);
    EXPECT_EQ(refusal("max-open-files", "4"), "accepted");
}

TEST(ExecLimitsConfig, AMistypedLimitNamesTheNearestSetting) {
    try {
        (void)configure({{"t", "/bin/true", "f:1"}, {"t.memory-limt", "1G", "f:2"}}, {});
        FAIL() << "accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("did you mean 'memory-limit'"), std::string::npos)
            << e.what();
    }
}

cgroup_support cgroup_with(bool memory, bool cpu, bool pids) {
    cgroup_support cg;
    cg.usable = true;
    cg.path = "/sys/fs/cgroup/zkd.service";
    cg.memory = memory;
    cg.cpu = cpu;
    cg.pids = pids;
    return cg;
}

resource_limits all_limits() {
    resource_limits l;
    l.memory = std::size_t{64} << 20;
    l.cpu_time = 2s;
    l.cpu_percent = 50;
    l.max_processes = 8;
    l.max_open_files = 16;
    return l;
}

TEST(ExecLimitsPlan, ACgroupTakesWhatItCanAndRlimitsTheRest) {
    const auto l = all_limits();
    const auto full = plan_limits(l, cgroup_with(true, true, true), false);
    EXPECT_EQ(full.memory, enforcement::cgroup);
    EXPECT_EQ(full.cpu_time, enforcement::rlimit);
    EXPECT_EQ(full.cpu_share, enforcement::cgroup);
    EXPECT_EQ(full.processes, enforcement::cgroup);
    EXPECT_EQ(full.open_files, enforcement::rlimit);
    EXPECT_TRUE(full.uses_cgroup());

    const auto partial = plan_limits(l, cgroup_with(false, false, true), false);
    EXPECT_EQ(partial.memory, enforcement::rlimit);
    EXPECT_EQ(partial.cpu_share, enforcement::none);
    EXPECT_EQ(partial.processes, enforcement::cgroup);
}

TEST(ExecLimitsPlan, WithoutACgroupRlimitsAndWhatTheyCannotDo) {
    const auto l = all_limits();
    cgroup_support none;
    none.reason = "no cgroup v2 hierarchy is mounted";
    none.memory = none.cpu = none.pids = true;  // ignored: not usable
    const auto root = plan_limits(l, none, false);
    EXPECT_EQ(root.memory, enforcement::rlimit);
    EXPECT_EQ(root.cpu_time, enforcement::rlimit);
    EXPECT_EQ(root.cpu_share, enforcement::none);
    EXPECT_EQ(root.processes, enforcement::none) << "RLIMIT_NPROC does not hold for root";
    EXPECT_EQ(root.open_files, enforcement::rlimit);
    EXPECT_FALSE(root.uses_cgroup());
    EXPECT_EQ(plan_limits(l, none, true).processes, enforcement::rlimit);
    EXPECT_EQ(plan_limits(resource_limits{}, cgroup_with(true, true, true), true), limit_plan{});
}

TEST(ExecLimitsPlan, TheStartUpLineSaysHowEachLimitIsEnforced) {
    const auto l = all_limits();
    const auto cg = describe_limits(l, plan_limits(l, cgroup_with(true, true, true), false));
    EXPECT_EQ(
        cg,
        "memory 64MiB (cgroup memory.max, the program's tree), CPU time 2s (RLIMIT_CPU, each "
        "process), CPU share 50% of a core (cgroup cpu.max, the program's tree), processes 8 "
        "(cgroup pids.max, the program's tree), open files 16 (RLIMIT_NOFILE, each process)"
    );
    const auto rl = describe_limits(l, plan_limits(l, cgroup_support{}, false));
    EXPECT_NE(rl.find("memory 64MiB (RLIMIT_DATA, each process)"), std::string::npos) << rl;
    EXPECT_NE(rl.find("CPU share 50% of a core NOT IN FORCE"), std::string::npos) << rl;
    EXPECT_NE(rl.find("processes 8 NOT IN FORCE"), std::string::npos) << rl;
    EXPECT_EQ(describe_limits(resource_limits{}, limit_plan{}), "no limits");
}

std::optional<zkd::protocol::task_error> verdict(
    const limit_plan& p, const limit_evidence& e, const resource_limits& l = all_limits()
) {
    return limit_exceeded(l, p, e);
}

TEST(ExecLimitsVerdict, CgroupEventsAreCertain) {
    const auto l = all_limits();
    const auto p = plan_limits(l, cgroup_with(true, true, true), false);
    limit_evidence oom;
    oom.signal = SIGKILL;
    oom.oom_kills = 1;
    auto v = verdict(p, oom);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->code, codes::memory_limit);
    EXPECT_NE(v->message.find("memory-limit of 64MiB (cgroup memory.max)"), std::string::npos);
    // A grandchild OOM-killed, the program failing after it: still the limit.
    oom.signal = 0;
    oom.exit_code = 1;
    EXPECT_EQ(verdict(p, oom)->code, codes::memory_limit);
    // ...but a program that coped and exited 0 succeeded.
    oom.exit_code = 0;
    EXPECT_FALSE(verdict(p, oom));

    limit_evidence forks;
    forks.exit_code = 2;
    forks.pids_max = 3;
    forks.stderr_tail = "fork failed\n";
    v = verdict(p, forks);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->code, codes::process_limit);
    EXPECT_NE(v->message.find("3 of its forks were refused at max-processes 8"), std::string::npos);
    EXPECT_NE(v->message.find("; stderr: fork failed"), std::string::npos) << v->message;
    // Counted by a cgroup the plan does not use: no sign.
    const auto rl = plan_limits(l, cgroup_support{}, false);
    EXPECT_FALSE(verdict(rl, forks));
    oom.exit_code = 1;
    EXPECT_FALSE(verdict(rl, oom));
}

TEST(ExecLimitsVerdict, CpuTimeBySigxcpuOrBySigkillWithTheTimeUsedUp) {
    const auto l = all_limits();
    const auto p = plan_limits(l, cgroup_support{}, false);
    limit_evidence e;
    e.signal = SIGXCPU;
    auto v = verdict(p, e);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->code, codes::cpu_limit);
    EXPECT_NE(
        v->message.find("cpu-limit of 2s of CPU time (RLIMIT_CPU): killed by SIGXCPU"),
        std::string::npos
    ) << v->message;
    e.signal = SIGKILL;  // it ignored SIGXCPU: the hard limit
    e.cpu_used = 3000ms;
    EXPECT_EQ(verdict(p, e)->code, codes::cpu_limit);
    e.cpu_used = 100ms;  // killed by someone else
    EXPECT_FALSE(verdict(p, e));
    e.cpu_used = 3000ms;
    e.stopped = true;  // zkd killed it (cancel, timeout)
    EXPECT_FALSE(verdict(p, e));
    resource_limits no_cpu = l;
    no_cpu.cpu_time = 0ms;
    limit_evidence x;
    x.signal = SIGXCPU;
    EXPECT_FALSE(verdict(plan_limits(no_cpu, cgroup_support{}, false), x, no_cpu));
}

TEST(ExecLimitsVerdict, RlimitFailuresAreInferredFromStderrOnlyUnderThatLimit) {
    const auto l = all_limits();
    const auto p = plan_limits(l, cgroup_support{}, true);
    limit_evidence e;
    e.exit_code = 1;
    e.stderr_tail = "Traceback ...\nMemoryError\n";
    auto v = verdict(p, e);
    ASSERT_TRUE(v);
    EXPECT_EQ(v->code, codes::memory_limit);
    EXPECT_NE(
        v->message.find("(RLIMIT_DATA) and its stderr reports an allocation failure"),
        std::string::npos
    );
    e.signal = SIGABRT;
    e.stderr_tail = "terminate called after throwing an instance of 'std::bad_alloc'";
    EXPECT_EQ(verdict(p, e)->code, codes::memory_limit);
    e.signal = 0;
    e.stderr_tail = "OSError: [Errno 24] Too many open files: '/tmp/x'";
    EXPECT_EQ(verdict(p, e)->code, codes::open_files_limit);
    e.stderr_tail = "sh: 1: Cannot fork: Resource temporarily unavailable";
    EXPECT_EQ(verdict(p, e)->code, codes::process_limit);
    e.stderr_tail = "something else broke";
    EXPECT_FALSE(verdict(p, e));
    // The same words without the limit in force are the program's own failure.
    e.stderr_tail = "MemoryError";
    EXPECT_FALSE(verdict(limit_plan{}, e));
    e.stderr_tail = "Too many open files";
    EXPECT_FALSE(verdict(limit_plan{}, e));
    // Or after zkd stopped it.
    e.stderr_tail = "MemoryError";
    e.stopped = true;
    EXPECT_FALSE(verdict(p, e));
}

TEST(ExecLimitsVerdict, ClassifyGivesTheLimitsCodeAndKeepsOthers) {
    program_config c = with({{"memory-limit", "64M"}, {"cpu-limit", "1s"}});
    const auto p = plan_limits(c.limits, cgroup_support{}, false);
    run_outcome o;
    o.signal = SIGXCPU;
    auto r = classify(c, o, p);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, codes::cpu_limit);
    o.signal = 0;
    o.exit_code = 0;
    o.output = "{\"ok\":1}";
    EXPECT_TRUE(classify(c, o, p));
    o.exit_code = 3;
    o.stderr_tail = "boom";
    r = classify(c, o, p);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, codes::handler_error);
    o.output_too_large = true;
    o.stderr_tail = "MemoryError";
    EXPECT_EQ(classify(c, o, p).error().code, codes::output_too_large);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
