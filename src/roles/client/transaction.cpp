// SPDX-License-Identifier: MIT
// task_transaction: an application's own ops and its tasks' pending creates in one
// transaction (roles/client/task_client.hpp), checked and packed as submit() does.
#include "roles/client/submit_fsm.hpp"
#include "roles/client/task_client.hpp"
#include "roles/txn/zk_ops.hpp"

#include <utility>

namespace zkd::roles {

task_transaction::task_transaction(protocol::layout l, std::string client, std::int64_t now_ms)
    : l_(l), client_(std::move(client)), now_ms_(now_ms) {}

zkco::result<void> task_transaction::add_task(const std::string& tid, protocol::task_spec task) {
    std::vector<protocol::task_spec> one;
    one.push_back(std::move(task));
    auto packed = pack_tasks(std::move(one), 1, client_, now_ms_);
    if (!packed) {
        return zkco::error_code(packed.error());
    }
    tasks_.emplace_back(zkco::op::create{
        l_.pending_task(tid), std::move(packed->front().data), zkco::create_mode::persistent, {}});
    return {};
}

std::vector<zkco::multi_op> task_transaction::ops() const {
    std::vector<zkco::multi_op> all;
    all.reserve(own_.size() + tasks_.size() + 1);
    all.insert(all.end(), own_.begin(), own_.end());
    all.insert(all.end(), tasks_.begin(), tasks_.end());
    append_change_logs(all);  // the master follows its shards by them (§6)
    return all;
}

}  // namespace zkd::roles
