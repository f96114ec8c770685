// SPDX-License-Identifier: MIT
// slot_index: the master's workers indexed for placement pick as protocol::placer picks over
// the same workers, however their counts change; its totals are those of a walk over them.
#include "roles/master/detail/slot_index.hpp"

#include "protocol/placement.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace zkd::roles {
namespace ZKD_UNITY_ID {

using protocol::placement_policy;

slot_index::worker make(int capacity, int used, std::vector<std::string> types, int threads = 1) {
    slot_index::worker w;
    w.capacity = capacity;
    w.used = used;
    w.types = std::move(types);
    w.threads = threads;
    w.open = true;
    w.assignable = true;
    return w;
}

TEST(SlotIndex, LeastLoadedTakesTheMostFreeAndTurnsAmongTies) {
    slot_index index(placement_policy::least_loaded);
    index.put("a", make(4, 1, {"echo"}));
    index.put("b", make(4, 0, {"echo"}));
    index.put("c", make(4, 0, {"echo"}));
    EXPECT_EQ(index.pick("echo"), "b");
    index.set_used("b", 1);
    EXPECT_EQ(index.pick("echo"), "c");  // the tie: the next id after the last pick
    index.set_used("c", 1);
    EXPECT_EQ(index.pick("echo"), "a");  // 3 free each now: after c, wrapping around
    EXPECT_EQ(index.free_assignable(), 3 + 3 + 3);
    EXPECT_EQ(index.pick("other"), std::nullopt);
}

TEST(SlotIndex, SkippedWorkersAreNotPickedAndDoNotSetTheMostFree) {
    slot_index index(placement_policy::least_loaded);
    index.put("a", make(4, 0, {"echo"}));
    index.put("b", make(4, 2, {"echo"}));
    const auto skip_a = [](std::string_view id) { return id == "a"; };
    EXPECT_EQ(index.pick("echo", {}, skip_a), "b");
    const auto skip_all = [](std::string_view) { return true; };
    EXPECT_EQ(index.pick("echo", {}, skip_all), std::nullopt);
}

TEST(SlotIndex, TouchedClosedAndUnhealthyWorkersAreNotPicked) {
    slot_index index(placement_policy::least_loaded);
    auto touched = make(4, 0, {"echo"});
    touched.assignable = false;
    index.put("touched", touched);
    auto sick = make(4, 0, {"echo", "x"});
    sick.unhealthy = {"echo"};
    index.put("sick", sick);
    EXPECT_EQ(index.pick("echo"), std::nullopt);
    EXPECT_TRUE(index.anyone_serves("echo"));  // served, though none takes it now
    EXPECT_EQ(index.free_open(), 8);
    EXPECT_EQ(index.free_assignable(), 4);
    EXPECT_EQ(index.pick("x"), "sick");
    auto gone = touched;
    gone.open = false;
    index.put("touched", gone);
    index.erase("sick");
    EXPECT_FALSE(index.anyone_serves("echo"));
    EXPECT_EQ(index.open_workers(), 0U);
    EXPECT_EQ(index.find("touched"), nullptr);
}

TEST(SlotIndex, KeepsABatchOnAWorkerUpToItsThreads) {
    slot_index index(placement_policy::least_loaded);
    index.put("a", make(8, 0, {"echo"}, 4));
    index.put("b", make(8, 0, {"echo"}, 4));
    auto first = index.pick("echo");
    ASSERT_TRUE(first);
    for (int used = 1; used <= 3; ++used) {
        index.set_used(*first, used);
        EXPECT_EQ(index.pick("echo", *first), *first) << used;
    }
    index.set_used(*first, 4);  // 4 fewer free than the other: its turn ends
    EXPECT_NE(index.pick("echo", *first), *first);
}

// The reference: a placer over the assignable workers in id order, as the master built them
// for every decision before the index.
std::vector<protocol::worker_slot> reference_slots(
    const std::map<std::string, slot_index::worker>& all, const std::vector<std::string>& skip
) {
    std::vector<protocol::worker_slot> out;
    for (const auto& [id, w] : all) {
        if (!w.assignable || std::find(skip.begin(), skip.end(), id) != skip.end()) {
            continue;
        }
        out.push_back(protocol::worker_slot{id, w.capacity, w.used, w.types, w.threads, w.unhealthy}
        );
    }
    return out;
}

void compare_with_placer(placement_policy policy, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    const auto roll = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    const std::vector<std::string> types{"a", "b", "c"};
    slot_index index(policy, seed);
    protocol::placer placer(policy, seed);
    std::map<std::string, slot_index::worker> all;
    std::string mate;
    for (int step = 0; step < 3000; ++step) {
        const auto id = "w" + std::to_string(roll(40));
        const int what = roll(10);
        if (what == 0) {
            all.erase(id);
            index.erase(id);
        } else if (what <= 2) {
            slot_index::worker w;
            w.capacity = roll(5);
            w.used = roll(6);
            w.threads = 1 + roll(3);
            for (const auto& t : types) {
                if (roll(3) > 0) {
                    w.types.push_back(t);
                }
                if (roll(6) == 0) {
                    w.unhealthy.push_back(t);
                }
            }
            w.open = roll(8) > 0;
            w.assignable = w.open && roll(4) > 0;
            index.put(id, w);
            if (w.open || w.assignable) {
                std::sort(w.types.begin(), w.types.end());
                all[id] = w;
            } else {
                all.erase(id);
            }
        } else if (what == 3) {
            if (auto it = all.find(id); it != all.end()) {
                it->second.used = roll(6);
                index.set_used(id, it->second.used);
            }
        } else {
            // A pick, as the master's decision makes it: mate the previous pick half the time,
            // a worker skipped now and then (a suspect).
            const auto& type = types[static_cast<std::size_t>(roll(3))];
            const std::vector<std::string> skip =
                roll(4) == 0 ? std::vector<std::string>{"w" + std::to_string(roll(40))}
                             : std::vector<std::string>{};
            const std::string batch_mate = roll(2) == 0 ? mate : std::string();
            auto slots = reference_slots(all, skip);
            const auto want = placer.pick(slots, type, batch_mate);
            const auto got = index.pick(type, batch_mate, [&](std::string_view w) {
                return std::find(skip.begin(), skip.end(), w) != skip.end();
            });
            ASSERT_EQ(got.has_value(), want.has_value()) << "step " << step;
            if (!want) {
                continue;
            }
            ASSERT_EQ(*got, std::string(slots[*want].id)) << "step " << step;
            mate = *got;
            all[mate].used += 1;
            index.set_used(mate, all[mate].used);
        }
        // The totals, as a walk over all of them finds them.
        long free_open = 0;
        long free_assignable = 0;
        std::size_t open = 0;
        std::vector<protocol::worker_slot> open_slots;
        for (const auto& [wid, w] : all) {
            if (w.open) {
                ++open;
                free_open += w.free_slots();
                open_slots.push_back(protocol::worker_slot{
                    wid, w.capacity, w.used, w.types, w.threads, w.unhealthy});
            }
            if (w.assignable) {
                free_assignable += w.free_slots();
            }
        }
        ASSERT_EQ(index.open_workers(), open) << "step " << step;
        ASSERT_EQ(index.free_open(), free_open) << "step " << step;
        ASSERT_EQ(index.free_assignable(), free_assignable) << "step " << step;
        for (const auto& t : types) {
            ASSERT_EQ(index.anyone_serves(t), protocol::anyone_serves(open_slots, t))
                << "step " << step << " type " << t;
        }
    }
}

TEST(SlotIndex, PicksAsThePlacerLeastLoaded) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        compare_with_placer(placement_policy::least_loaded, seed);
    }
}

TEST(SlotIndex, PicksAsThePlacerRoundRobin) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        compare_with_placer(placement_policy::round_robin, seed);
    }
}

TEST(SlotIndex, PicksAsThePlacerRandom) {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        compare_with_placer(placement_policy::random, seed);
    }
}

}  // namespace ZKD_UNITY_ID
}  // namespace zkd::roles
