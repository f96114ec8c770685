// SPDX-License-Identifier: MIT
// Session 17 experiment: sets a custom EEVDF slice (sched_attr.sched_runtime, honoured for
// SCHED_OTHER since Linux 6.12) on every thread of the given processes, so that their
// wake-ups preempt the running thread sooner. capture.sh uses it (SLICE,
// ZKSLICE). Build: gcc -O2 -o slice slice.c    Run: slice NANOSECONDS PID...
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct sched_attr as the kernel defines it (glibc 2.36 has no wrapper). */
struct sched_attr_v1 {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
    uint32_t sched_util_min;
    uint32_t sched_util_max;
};

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: slice NANOSECONDS PID...\n");
        return 2;
    }
    const uint64_t ns = strtoull(argv[1], NULL, 10);
    for (int i = 2; i < argc; ++i) {
        char dir_name[64];
        snprintf(dir_name, sizeof dir_name, "/proc/%s/task", argv[i]);
        DIR* dir = opendir(dir_name);
        if (dir == NULL) {
            perror(dir_name);
            continue;
        }
        for (struct dirent* e; (e = readdir(dir)) != NULL;) {
            if (e->d_name[0] == '.') {
                continue;
            }
            const int tid = atoi(e->d_name);
            struct sched_attr_v1 a;
            memset(&a, 0, sizeof a);
            if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) != 0) {
                perror("sched_getattr");
                continue;
            }
            a.size = sizeof a;
            a.sched_runtime = ns;
            if (syscall(SYS_sched_setattr, tid, &a, 0) != 0) {
                perror("sched_setattr");
            }
        }
        closedir(dir);
    }
    return 0;
}
