# SPDX-License-Identifier: MIT
# Chaos rounds of zkd-chaos (tools/chaos) against the built zkd. Included from
# tests/programs.cmake.
if(NOT TARGET zkd_chaos_core)
    return()
endif()

# A short seeded run of the real thing: 3 ZooKeeper servers, 4 `zkd run`, 12 s of load at
# 100 tasks/s with a fault every ~2.5 s, then the invariants; fails on any violation. Seed 3
# plans: master-kill 1.5 s, zkd-pause 4.1 s, zk-kill (and restart) 5.7 s, zkd-kill 8.5 s,
# master-kill 10.4 s (tests/unit/tools/chaos/schedule_test.cpp pins how seeds map to schedules).
# It starts 3 JVMs and 4 zkd: PROCESSORS 2 keeps ctest -j2 from running another test beside it.
add_test(NAME chaos_short
         COMMAND zkd_chaos --seed 3 --duration 12s --rate 100 --every 2500ms --pause-max 5s
                 --settle 40s --clean-on-pass --zkd $<TARGET_FILE:zkd>)
set_tests_properties(chaos_short PROPERTIES COST 30 LABELS "integration;chaos" TIMEOUT 180 PROCESSORS 2)

# Delayed tasks, schedules and workflows under master and worker SIGKILLs (docs/chaos.md
# "Jobs"): 20 s of the jobs workloads with a fault every ~4 s, then their invariants (no
# early start, each delayed task ended once, each due time fired once, each workflow step
# launched once, the fan-in once). Seed 9 plans: master-kill 3.9 s, zkd-kill 7.9 s,
# master-kill 11.9 s, zkd-kill 16.3 s.
add_test(NAME chaos_jobs
         COMMAND zkd_chaos --seed 9 --workload jobs --faults master-kill,zkd-kill --duration 20s
                 --every 4s --settle 40s --namespace chaosjobs --clean-on-pass
                 --zkd $<TARGET_FILE:zkd>)
set_tests_properties(chaos_jobs PROPERTIES COST 30 LABELS "integration;chaos" TIMEOUT 180 PROCESSORS 2)
