// SPDX-License-Identifier: MIT
// T6's reads (docs/protocol.md §6 T6): a departed worker's directory and assignments, for
// master_fsm, which decides what becomes of them (master_fsm_requeue.cpp).
#include "roles/master/detail/master_session.hpp"
#include "zkco/read_batch.hpp"

namespace zkd::roles::detail {

void master_session::carry_out(master_do::list_departed& a) {
    group_.spawn([this, worker = std::move(a.worker)] { return list_departed(worker); }, "requeue");
}

void master_session::carry_out(master_do::read_departed& a) {
    group_.spawn(
        [this, worker = std::move(a.worker), tids = std::move(a.tids), paths = std::move(a.paths)](
        ) mutable { return read_departed(std::move(worker), std::move(tids), std::move(paths)); },
        "requeue"
    );
}

void master_session::carry_out(master_do::requeue_task& a) {
    send_txn(a);
}

void master_session::carry_out(master_do::remove_departed& a) {
    send_txn(a);
}

void master_session::carry_out(master_do::remove_marker& a) {
    send(std::move(a.ops), sent::nothing{});
}

/// Lists a departed worker's directory (again after a lost connection, until stopping).
asio::awaitable<void> master_session::list_departed(std::string worker) {
    const std::string dir = protocol::layout::assign_dir(worker);
    while (!stopping()) {
        auto kids = co_await zk_.get_children(dir);
        if (kids) {
            feed(master_saw::departed_listed{worker, std::move(kids->names)});
            co_return;
        }
        if (kids.error() == zkco::errc::no_node) {
            feed(master_saw::departed_listed{worker, std::nullopt});
            co_return;
        }
        const bool go_on = co_await recover(kids.error(), dir);
        if (!go_on) {
            co_return;
        }
    }
}

/// Reads a departed worker's assignments (at once).
asio::awaitable<void> master_session::read_departed(
    std::string worker, std::vector<std::string> tids, std::vector<std::string> paths
) {
    auto nodes = co_await zkco::get_all(zk_, std::move(paths));
    master_saw::departed_read read{std::move(worker), {}};
    read.nodes.reserve(tids.size());
    for (std::size_t i = 0; i < tids.size(); ++i) {
        auto& n = read.nodes.emplace_back(master_saw::departed_node{std::move(tids[i]), {}});
        if (nodes[i]) {
            n.data = std::move(nodes[i]->data);
        }
    }
    feed(read);
}

}  // namespace zkd::roles::detail
