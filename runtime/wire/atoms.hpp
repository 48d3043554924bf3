// SPDX-License-Identifier: Apache-2.0
#pragma once
// The atoms of Monkey's in-process messages (CAF 0.17 form, at most 10 characters).

#include <caf/atom.hpp>

namespace monkey::atoms {

using write = caf::atom_constant<caf::atom("m_write")>;
using metric = caf::atom_constant<caf::atom("m_metric")>;
using flush = caf::atom_constant<caf::atom("m_flush")>;
using load = caf::atom_constant<caf::atom("m_load")>;
using last_metrics = caf::atom_constant<caf::atom("m_lastmet")>;
using metric_sum = caf::atom_constant<caf::atom("m_metsum")>;
using compact = caf::atom_constant<caf::atom("m_compact")>;
using counts = caf::atom_constant<caf::atom("m_counts")>;
using spawned = caf::atom_constant<caf::atom("m_spawned")>;
using exited = caf::atom_constant<caf::atom("m_exited")>;
using started = caf::atom_constant<caf::atom("m_started")>;
using done = caf::atom_constant<caf::atom("m_done")>;
using stop = caf::atom_constant<caf::atom("m_stop")>;
using kill = caf::atom_constant<caf::atom("m_kill")>;
using timeout = caf::atom_constant<caf::atom("m_timeout")>;
using tick = caf::atom_constant<caf::atom("m_tick")>;
using schedule = caf::atom_constant<caf::atom("m_sched")>;
using shutdown = caf::atom_constant<caf::atom("m_shutdn")>;
using address = caf::atom_constant<caf::atom("m_addr")>;

} // namespace monkey::atoms

namespace monkey::atoms {

using tree = caf::atom_constant<caf::atom("m_tree")>;
using which = caf::atom_constant<caf::atom("m_which")>;
using run_tasks = caf::atom_constant<caf::atom("m_runtask")>;
using task_done = caf::atom_constant<caf::atom("m_taskdone")>;
using task_flush = caf::atom_constant<caf::atom("m_tflush")>;
using task_wait = caf::atom_constant<caf::atom("m_twait")>;
using load_tasks = caf::atom_constant<caf::atom("m_ldtasks")>;
using load_tombstones = caf::atom_constant<caf::atom("m_ldtomb")>;
using wal_trim = caf::atom_constant<caf::atom("m_waltrim")>;
using discover = caf::atom_constant<caf::atom("m_discover")>;
using info = caf::atom_constant<caf::atom("m_info")>;
using subscribe = caf::atom_constant<caf::atom("m_subscr")>;
using members = caf::atom_constant<caf::atom("m_members")>;
using forward = caf::atom_constant<caf::atom("m_forward")>;
using sync = caf::atom_constant<caf::atom("m_sync")>;
using fence = caf::atom_constant<caf::atom("m_fence")>;
using reserve_round = caf::atom_constant<caf::atom("m_rsvround")>;
using check = caf::atom_constant<caf::atom("m_check")>;

} // namespace monkey::atoms
