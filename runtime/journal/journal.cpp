// SPDX-License-Identifier: Apache-2.0
#include "runtime/journal/journal.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sys/stat.h>
#include <unordered_map>

#include <sqlite3.h>

namespace monkey {

namespace {

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// SQLite's WAL checksum: Fibonacci-weighted sums over 32-bit words in the byte order
// given by the magic number, chained from the previous frame.
void wal_checksum(bool big_endian, const unsigned char* data, size_t n, uint32_t& s0,
                  uint32_t& s1) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    uint32_t x0, x1;
    if (big_endian) {
      x0 = be32(data + i);
      x1 = be32(data + i + 4);
    } else {
      std::memcpy(&x0, data + i, 4);
      std::memcpy(&x1, data + i + 4, 4);
    }
    s0 += x0 + s1;
    s1 += x1 + s0;
  }
}

// The migrations, in order; index i moves the schema from version i to i + 1.
const char* const migrations[] = {
  // 0 → 1
  "CREATE TABLE jobs(id TEXT PRIMARY KEY, state INTEGER NOT NULL, version INTEGER NOT NULL,"
  " updated_ms INTEGER NOT NULL, final INTEGER NOT NULL, record BLOB NOT NULL);"
  "CREATE INDEX jobs_final ON jobs(final, updated_ms);"
  "CREATE TABLE transitions(job_id TEXT NOT NULL, version INTEGER NOT NULL,"
  " state INTEGER NOT NULL, ts_ms INTEGER NOT NULL, reason TEXT NOT NULL,"
  " PRIMARY KEY(job_id, version));"
  "CREATE TABLE metrics(job_id TEXT NOT NULL, attempt INTEGER NOT NULL, ts_ms INTEGER NOT NULL,"
  " key TEXT NOT NULL, value REAL NOT NULL);"
  "CREATE INDEX metrics_job ON metrics(job_id, key, ts_ms);",
  // 1 → 2: task batches (accept records) and their final ranges
  "CREATE TABLE task_batches(id TEXT PRIMARY KEY, submitted_ms INTEGER NOT NULL,"
  " count INTEGER NOT NULL, final_count INTEGER NOT NULL DEFAULT 0,"
  " finished_ms INTEGER NOT NULL DEFAULT 0, record BLOB NOT NULL);"
  "CREATE TABLE task_ranges(batch TEXT NOT NULL, first INTEGER NOT NULL, count INTEGER NOT NULL,"
  " ok INTEGER NOT NULL, cause TEXT NOT NULL, ended_ms INTEGER NOT NULL);"
  "CREATE INDEX task_ranges_batch ON task_ranges(batch, first);",
  // 2 → 3: metric points get a step and a rank, and are stored once each (replicated
  // points may arrive more than once). Older points become steps in arrival order.
  "ALTER TABLE metrics ADD COLUMN step INTEGER NOT NULL DEFAULT 0;"
  "ALTER TABLE metrics ADD COLUMN rank INTEGER NOT NULL DEFAULT 0;"
  "UPDATE metrics SET step = rowid;"
  "CREATE UNIQUE INDEX metrics_point ON metrics(job_id, attempt, rank, key, step);"
  // ... and the tombstones of jobs deleted by `monkey rm`.
  "CREATE TABLE tombstones(id TEXT PRIMARY KEY, deleted_ms INTEGER NOT NULL);",
};

/// A metric row selected as (attempt, ts_ms, key, value, step, rank).
metric_point read_metric(sqlite3_stmt* s, const job_id& job) {
  metric_point m;
  m.job = job;
  m.attempt = sqlite3_column_int(s, 0);
  m.ts_ms = sqlite3_column_int64(s, 1);
  m.key = reinterpret_cast<const char*>(sqlite3_column_text(s, 2));
  m.value = sqlite3_column_double(s, 3);
  m.step = sqlite3_column_int64(s, 4);
  m.rank = sqlite3_column_int(s, 5);
  return m;
}

struct stmt_guard {
  sqlite3_stmt* s = nullptr;
  ~stmt_guard() { sqlite3_finalize(s); }
};

} // namespace

wal_scan scan_wal(const std::string& path) {
  wal_scan out;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return out;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  out.file_bytes = data.size();
  auto* p = reinterpret_cast<const unsigned char*>(data.data());
  if (data.size() < 32) {
    out.detail = data.empty() ? "" : "WAL shorter than its header";
    return out;
  }
  uint32_t magic = be32(p);
  if (magic != 0x377f0682 && magic != 0x377f0683) {
    out.detail = "WAL header has a bad magic number";
    return out;
  }
  bool big = (magic & 1) != 0;
  uint32_t page_size = be32(p + 8);
  uint32_t salt1 = be32(p + 16), salt2 = be32(p + 20);
  uint32_t s0 = 0, s1 = 0;
  wal_checksum(big, p, 24, s0, s1);
  if (s0 != be32(p + 24) || s1 != be32(p + 28)) {
    out.detail = "WAL header checksum mismatch";
    return out;
  }
  out.valid_bytes = 32;
  if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0) {
    out.detail = "WAL header has a bad page size";
    return out;
  }
  size_t frame = 24 + page_size;
  size_t pos = 32;
  bool chain_ok = true;
  for (; pos + frame <= data.size(); pos += frame) {
    const unsigned char* f = p + pos;
    bool salts = be32(f + 8) == salt1 && be32(f + 12) == salt2;
    if (!chain_ok) {
      // After the chain broke, a frame of the same generation means committed data
      // sits beyond the damage: corruption in the middle, not a torn tail.
      if (salts) {
        out.broken_in_middle = true;
        out.detail = "a WAL frame at offset " + std::to_string(pos)
                     + " of the current generation follows a damaged frame";
        break;
      }
      continue;
    }
    if (!salts) {
      chain_ok = false;
      continue;
    }
    uint32_t c0 = s0, c1 = s1;
    wal_checksum(big, f, 8, c0, c1);
    wal_checksum(big, f + 24, page_size, c0, c1);
    if (c0 != be32(f + 16) || c1 != be32(f + 20)) {
      chain_ok = false;
      continue;
    }
    s0 = c0;
    s1 = c1;
    if (be32(f + 4) != 0) { // commit frame
      out.valid_bytes = pos + frame;
    }
    ++out.frames_valid;
  }
  return out;
}

journal::~journal() {
  sqlite3_finalize(put_job_);
  sqlite3_finalize(put_transition_);
  sqlite3_finalize(put_metric_);
  sqlite3_finalize(put_tombstone_);
  sqlite3_finalize(del_job_);
  sqlite3_finalize(del_transitions_);
  sqlite3_finalize(del_metrics_);
  sqlite3_finalize(put_batch_);
  sqlite3_finalize(put_range_);
  sqlite3_finalize(batch_final_);
  if (db_)
    sqlite3_close(db_);
}

status journal::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return failure{msg.empty() ? std::string("unknown SQLite error") : msg};
  }
  return {};
}

expected<std::unique_ptr<journal>> journal::open(const std::string& dir,
                                                 std::vector<std::string>* warnings) {
  ::mkdir(dir.c_str(), 0700);
  std::unique_ptr<journal> j{new journal};
  j->path_ = dir + "/journal.db";
  auto wal_path = j->path_ + "-wal";
  auto scan = scan_wal(wal_path);
  if (scan.broken_in_middle)
    return failure{"journal " + wal_path + " is corrupt in the middle (" + scan.detail
                   + "): committed records would be lost, so the runtime refuses to start. "
                     "Move the data directory aside or restore it from a replica/backup."};
  if (scan.file_bytes > scan.valid_bytes && warnings) {
    warnings->push_back("journal: dropping " + std::to_string(scan.file_bytes - scan.valid_bytes)
                        + " bytes of torn or garbled WAL tail after the last valid commit ("
                        + std::to_string(scan.frames_valid) + " valid frames kept"
                        + (scan.detail.empty() ? "" : "; " + scan.detail) + ")");
  }
  if (sqlite3_open_v2(j->path_.c_str(), &j->db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr)
      != SQLITE_OK)
    return failure{"cannot open journal " + j->path_ + ": " + sqlite3_errmsg(j->db_)};
  sqlite3_busy_timeout(j->db_, 5000);
  // A 32 MB page cache (SQLite's default is 2 MB): the metric points' two indexes outgrow
  // 2 MB after about 20,000 points, and every insert then read their pages back through
  // pread (most of a node's CPU while a training job reported its steps). No mmap: an I/O
  // error there is a SIGBUS, not an error code.
  if (auto e = j->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                       " PRAGMA journal_size_limit=0; PRAGMA foreign_keys=OFF;"
                       " PRAGMA cache_size=-32768;");
      !e)
    return failure{"journal " + j->path_ + " cannot be opened (" + e.error()
                   + "): the file is not a valid SQLite database; refusing to start"};
  {
    stmt_guard st;
    sqlite3_prepare_v2(j->db_, "PRAGMA quick_check", -1, &st.s, nullptr);
    std::string verdict;
    while (st.s && sqlite3_step(st.s) == SQLITE_ROW) {
      auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
      if (t && std::strcmp(t, "ok") != 0 && verdict.size() < 400)
        verdict += std::string(verdict.empty() ? "" : "; ") + t;
    }
    if (!st.s)
      verdict = sqlite3_errmsg(j->db_);
    if (!verdict.empty())
      return failure{"journal " + j->path_ + " is corrupt (" + verdict
                     + "); refusing to start. Move the data directory aside or restore it."};
  }
  if (auto e = j->migrate(); !e)
    return failure{"journal " + j->path_ + ": migration failed: " + e.error()};
  if (auto e = j->prepare(); !e)
    return failure{"journal " + j->path_ + ": " + e.error()};
  return j;
}

status journal::migrate() {
  if (auto e = exec("CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);"
                    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);");
      !e)
    return e;
  int current = 0;
  {
    stmt_guard st;
    sqlite3_prepare_v2(db_, "SELECT max(version) FROM schema_version", -1, &st.s, nullptr);
    if (st.s && sqlite3_step(st.s) == SQLITE_ROW)
      current = sqlite3_column_int(st.s, 0);
  }
  if (current > schema_version)
    return failure{"the journal has schema version " + std::to_string(current)
           + ", newer than this build's " + std::to_string(schema_version)
           + ": upgrade Monkey"};
  for (int v = current; v < schema_version; ++v) {
    std::string sql = std::string("BEGIN;") + migrations[v]
                      + "INSERT INTO schema_version VALUES(" + std::to_string(v + 1) + ");COMMIT;";
    if (auto e = exec(sql.c_str()); !e) {
      exec("ROLLBACK;");
      return e;
    }
  }
  // Identity: a node id made once; the incarnation goes up at every open.
  std::string node_text, inc_text;
  {
    stmt_guard st;
    sqlite3_prepare_v2(db_, "SELECT key, value FROM meta", -1, &st.s, nullptr);
    while (st.s && sqlite3_step(st.s) == SQLITE_ROW) {
      std::string k = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
      std::string v = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 1));
      if (k == "node_id")
        node_text = v;
      else if (k == "incarnation")
        inc_text = v;
    }
  }
  if (auto parsed = node_id::parse(node_text))
    node_ = *parsed;
  else
    node_ = node_id::generate();
  incarnation_ = inc_text.empty() ? 1 : static_cast<uint32_t>(std::stoul(inc_text)) + 1;
  std::string sql = "BEGIN; INSERT OR REPLACE INTO meta VALUES('node_id','" + node_.str()
                    + "'); INSERT OR REPLACE INTO meta VALUES('incarnation','"
                    + std::to_string(incarnation_) + "'); COMMIT;";
  return exec(sql.c_str());
}

status journal::prepare() {
  auto prep = [&](const char* sql, sqlite3_stmt** out) -> status {
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, out, nullptr) != SQLITE_OK)
      return failure{sqlite3_errmsg(db_)};
    return {};
  };
  if (auto e = prep("INSERT INTO jobs(id, state, version, updated_ms, final, record)"
                    " VALUES(?1,?2,?3,?4,?5,?6) ON CONFLICT(id) DO UPDATE SET state=?2,"
                    " version=?3, updated_ms=?4, final=?5, record=?6"
                    // The replica rules (actors/coordinator/replica_rules.hpp): a final copy
                    // replaces any that is not; a final one is only rewritten at its own
                    // version (its holders moved); else the later version replaces.
                    " WHERE (final = 0 AND (?5 = 1 OR version <= ?3))"
                    " OR (final = 1 AND ?5 = 1 AND version = ?3)",
                    &put_job_);
      !e)
    return e;
  if (auto e = prep("INSERT OR IGNORE INTO transitions VALUES(?1,?2,?3,?4,?5)", &put_transition_);
      !e)
    return e;
  if (auto e = prep("INSERT OR IGNORE INTO metrics(job_id, attempt, ts_ms, key, value, step, rank)"
                    " VALUES(?1,?2,?3,?4,?5,?6,?7)",
                    &put_metric_);
      !e)
    return e;
  if (auto e = prep("INSERT OR IGNORE INTO tombstones VALUES(?1,?2)", &put_tombstone_); !e)
    return e;
  if (auto e = prep("DELETE FROM jobs WHERE id=?1", &del_job_); !e)
    return e;
  if (auto e = prep("DELETE FROM transitions WHERE job_id=?1", &del_transitions_); !e)
    return e;
  if (auto e = prep("DELETE FROM metrics WHERE job_id=?1", &del_metrics_); !e)
    return e;
  if (auto e = prep("INSERT OR IGNORE INTO task_batches(id, submitted_ms, count, record)"
                    " VALUES(?1,?2,?3,?4)",
                    &put_batch_);
      !e)
    return e;
  if (auto e = prep("UPDATE task_batches SET final_count = final_count + ?2,"
                    " finished_ms = max(finished_ms, ?3) WHERE id=?1",
                    &batch_final_);
      !e)
    return e;
  return prep("INSERT INTO task_ranges VALUES(?1,?2,?3,?4,?5,?6)", &put_range_);
}

status journal::checkpoint() {
  return exec("PRAGMA wal_checkpoint(TRUNCATE);");
}

status journal::write(const write_batch& batch) {
  if (batch.empty())
    return {};
  if (auto e = exec("BEGIN IMMEDIATE;"); !e)
    return e;
  auto fail = [&](const char* what) -> status {
    std::string msg = std::string(what) + ": " + sqlite3_errmsg(db_);
    exec("ROLLBACK;");
    return failure{msg};
  };
  for (auto& rec : batch.records) {
    auto id = rec.id.str();
    auto blob = encode(rec);
    sqlite3_reset(put_job_);
    sqlite3_bind_text(put_job_, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int(put_job_, 2, static_cast<int>(rec.state));
    sqlite3_bind_int64(put_job_, 3, static_cast<sqlite3_int64>(rec.version));
    sqlite3_bind_int64(put_job_, 4, rec.updated_ms);
    sqlite3_bind_int(put_job_, 5, is_final(rec.state) ? 1 : 0);
    sqlite3_bind_blob(put_job_, 6, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(put_job_) != SQLITE_DONE)
      return fail("writing a job record");
    if (sqlite3_changes(db_) == 0)
      continue; // the conflict rule kept the stored copy: nothing happened, no transition
    sqlite3_reset(put_transition_);
    sqlite3_bind_text(put_transition_, 1, id.data(), static_cast<int>(id.size()),
                      SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_transition_, 2, static_cast<sqlite3_int64>(rec.version));
    sqlite3_bind_int(put_transition_, 3, static_cast<int>(rec.state));
    sqlite3_bind_int64(put_transition_, 4, rec.updated_ms);
    sqlite3_bind_text(put_transition_, 5, rec.reason.data(), static_cast<int>(rec.reason.size()),
                      SQLITE_TRANSIENT);
    if (sqlite3_step(put_transition_) != SQLITE_DONE)
      return fail("writing a transition");
  }
  for (auto& gone : batch.erase) {
    auto id = gone.str();
    for (auto* st : {del_job_, del_transitions_, del_metrics_}) {
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
      if (sqlite3_step(st) != SQLITE_DONE)
        return fail("deleting a job");
    }
  }
  for (auto& gone : batch.tombstones) {
    sqlite3_reset(put_tombstone_);
    auto id = gone.str();
    sqlite3_bind_text(put_tombstone_, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_tombstone_, 2, now_ms());
    if (sqlite3_step(put_tombstone_) != SQLITE_DONE)
      return fail("writing a tombstone");
  }
  std::vector<const metric_point*> added; // applied to the summaries once committed
  for (auto& m : batch.metrics) {
    auto id = m.job.str();
    sqlite3_reset(put_metric_);
    sqlite3_bind_text(put_metric_, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int(put_metric_, 2, m.attempt);
    sqlite3_bind_int64(put_metric_, 3, m.ts_ms);
    sqlite3_bind_text(put_metric_, 4, m.key.data(), static_cast<int>(m.key.size()),
                      SQLITE_TRANSIENT);
    sqlite3_bind_double(put_metric_, 5, m.value);
    sqlite3_bind_int64(put_metric_, 6, m.step);
    sqlite3_bind_int(put_metric_, 7, m.rank);
    if (sqlite3_step(put_metric_) != SQLITE_DONE)
      return fail("writing a metric");
    if (sqlite3_changes(db_) > 0 && !summaries_.empty())
      added.push_back(&m);
  }
  for (auto& b : batch.task_batches) {
    auto id = b.id.str();
    auto blob = encode(b);
    sqlite3_reset(put_batch_);
    sqlite3_bind_text(put_batch_, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_batch_, 2, b.submitted_ms);
    sqlite3_bind_int64(put_batch_, 3, static_cast<sqlite3_int64>(b.count));
    sqlite3_bind_blob(put_batch_, 4, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(put_batch_) != SQLITE_DONE)
      return fail("writing a task batch");
  }
  for (auto& r : batch.task_ranges) {
    auto id = r.batch.str();
    sqlite3_reset(put_range_);
    sqlite3_bind_text(put_range_, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_range_, 2, static_cast<sqlite3_int64>(r.first));
    sqlite3_bind_int64(put_range_, 3, static_cast<sqlite3_int64>(r.count));
    sqlite3_bind_int(put_range_, 4, r.ok ? 1 : 0);
    sqlite3_bind_text(put_range_, 5, r.cause.data(), static_cast<int>(r.cause.size()),
                      SQLITE_TRANSIENT);
    sqlite3_bind_int64(put_range_, 6, r.ended_ms);
    if (sqlite3_step(put_range_) != SQLITE_DONE)
      return fail("writing a task range");
    sqlite3_reset(batch_final_);
    sqlite3_bind_text(batch_final_, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(batch_final_, 2, static_cast<sqlite3_int64>(r.count));
    sqlite3_bind_int64(batch_final_, 3, r.ended_ms);
    if (sqlite3_step(batch_final_) != SQLITE_DONE)
      return fail("counting a task range");
  }
  if (auto e = exec("COMMIT;"); !e) {
    exec("ROLLBACK;");
    return e;
  }
  for (auto& gone : batch.erase)
    summaries_.erase(gone.str());
  for (auto* m : added) {
    auto it = summaries_.find(m->job.str());
    if (it == summaries_.end())
      continue; // read from the points when first asked
    auto& s = it->second.stats[m->key];
    if (s.count == 0)
      s.first = s.min = s.max = m->value;
    s.count += 1;
    s.min = std::min(s.min, m->value);
    s.max = std::max(s.max, m->value);
    s.last = m->value;
    it->second.last[m->key] = *m;
  }
  return {};
}

expected<std::vector<journal::task_state>> journal::load_tasks() {
  std::vector<task_state> out;
  std::unordered_map<std::string, size_t> index;
  {
    stmt_guard st;
    if (sqlite3_prepare_v2(db_, "SELECT id, record FROM task_batches ORDER BY submitted_ms", -1,
                           &st.s, nullptr)
        != SQLITE_OK)
      return failure{sqlite3_errmsg(db_)};
    int rc;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
      std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
      auto* blob = static_cast<const char*>(sqlite3_column_blob(st.s, 1));
      auto n = static_cast<size_t>(sqlite3_column_bytes(st.s, 1));
      auto b = decode<task_batch>(std::string_view(blob ? blob : "", n), "task batch record");
      if (!b)
        return failure{"task batch " + id + ": " + b.error()};
      index[id] = out.size();
      out.push_back({std::move(*b), {}});
    }
    if (rc != SQLITE_DONE)
      return failure{sqlite3_errmsg(db_)};
  }
  stmt_guard st;
  if (sqlite3_prepare_v2(db_,
                         "SELECT batch, first, count, ok, cause, ended_ms FROM task_ranges"
                         " ORDER BY batch, first",
                         -1, &st.s, nullptr)
      != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    std::string id = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    auto it = index.find(id);
    if (it == index.end())
      continue; // its batch was compacted
    task_range r;
    r.batch = out[it->second].batch.id;
    r.first = static_cast<uint64_t>(sqlite3_column_int64(st.s, 1));
    r.count = static_cast<uint64_t>(sqlite3_column_int64(st.s, 2));
    r.ok = sqlite3_column_int(st.s, 3) != 0;
    r.cause = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 4));
    r.ended_ms = sqlite3_column_int64(st.s, 5);
    out[it->second].done.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE)
    return failure{sqlite3_errmsg(db_)};
  return out;
}

expected<std::vector<job_record>> journal::load_jobs() {
  stmt_guard st;
  if (sqlite3_prepare_v2(db_, "SELECT id, record FROM jobs", -1, &st.s, nullptr) != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  std::vector<job_record> out;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    auto* blob = static_cast<const char*>(sqlite3_column_blob(st.s, 1));
    auto n = static_cast<size_t>(sqlite3_column_bytes(st.s, 1));
    auto rec = decode<job_record>(std::string_view(blob ? blob : "", n), "journal record");
    if (!rec)
      return failure{"job " + std::string(reinterpret_cast<const char*>(
                                sqlite3_column_text(st.s, 0)))
                     + ": " + rec.error()};
    out.push_back(std::move(*rec));
  }
  if (rc != SQLITE_DONE)
    return failure{sqlite3_errmsg(db_)};
  return out;
}

expected<std::vector<metric_point>> journal::metrics(const job_id& job, const std::string& key,
                                                     size_t limit) {
  stmt_guard st;
  // In order of attempt, rank and step (points replicated from another node may arrive
  // out of order).
  const char* sql = key.empty() ? "SELECT attempt, ts_ms, key, value, step, rank FROM metrics"
                                  " WHERE job_id=?1 ORDER BY attempt, rank, step LIMIT ?2"
                                : "SELECT attempt, ts_ms, key, value, step, rank FROM metrics"
                                  " WHERE job_id=?1 AND key=?3 ORDER BY attempt, rank, step"
                                  " LIMIT ?2";
  if (sqlite3_prepare_v2(db_, sql, -1, &st.s, nullptr) != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  auto id = job.str();
  sqlite3_bind_text(st.s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st.s, 2, static_cast<sqlite3_int64>(limit));
  if (!key.empty())
    sqlite3_bind_text(st.s, 3, key.c_str(), -1, SQLITE_TRANSIENT);
  std::vector<metric_point> out;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    out.push_back(read_metric(st.s, job));
  }
  return out;
}

expected<std::map<std::string, metric_point>> journal::last_metrics(const job_id& job) {
  auto sum = summary_of(job);
  if (!sum)
    return failure{sum.error()};
  return (*sum)->last;
}

expected<const journal::job_summary*> journal::summary_of(const job_id& job) {
  auto id = job.str();
  if (auto it = summaries_.find(id); it != summaries_.end())
    return &it->second;
  job_summary sum;
  stmt_guard st;
  if (sqlite3_prepare_v2(db_,
                         "SELECT attempt, ts_ms, key, value, step, rank FROM metrics WHERE rowid IN"
                         " (SELECT max(rowid) FROM metrics WHERE job_id=?1 GROUP BY key)",
                         -1, &st.s, nullptr)
      != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  sqlite3_bind_text(st.s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    auto m = read_metric(st.s, job);
    sum.last[m.key] = m;
  }
  auto stats = read_summary(job);
  if (!stats)
    return failure{stats.error()};
  sum.stats = std::move(*stats);
  if (summaries_.size() >= 8192)
    summaries_.clear(); // a bound: a listing of more jobs reads them again
  return &(summaries_[id] = std::move(sum));
}

expected<std::vector<job_id>> journal::load_tombstones() {
  stmt_guard st;
  if (sqlite3_prepare_v2(db_, "SELECT id FROM tombstones ORDER BY deleted_ms", -1, &st.s, nullptr)
      != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  std::vector<job_id> out;
  while (sqlite3_step(st.s) == SQLITE_ROW)
    if (auto id = job_id::parse(reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0))))
      out.push_back(*id);
  return out;
}

expected<std::map<std::string, metric_stats>> journal::metric_summary(const job_id& job) {
  auto sum = summary_of(job);
  if (!sum)
    return failure{sum.error()};
  return (*sum)->stats;
}

expected<std::map<std::string, metric_stats>> journal::read_summary(const job_id& job) {
  stmt_guard st;
  // first and last by insertion order (rowid), as the points arrived.
  if (sqlite3_prepare_v2(db_,
                         "SELECT key, count(*), min(value), max(value), min(rowid), max(rowid)"
                         " FROM metrics WHERE job_id=?1 GROUP BY key",
                         -1, &st.s, nullptr)
      != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  auto id = job.str();
  sqlite3_bind_text(st.s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
  std::map<std::string, metric_stats> out;
  std::vector<std::pair<std::string, std::pair<sqlite3_int64, sqlite3_int64>>> ends;
  while (sqlite3_step(st.s) == SQLITE_ROW) {
    std::string key = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    auto& s = out[key];
    s.count = sqlite3_column_int64(st.s, 1);
    s.min = sqlite3_column_double(st.s, 2);
    s.max = sqlite3_column_double(st.s, 3);
    ends.push_back({key, {sqlite3_column_int64(st.s, 4), sqlite3_column_int64(st.s, 5)}});
  }
  stmt_guard one;
  if (sqlite3_prepare_v2(db_, "SELECT value FROM metrics WHERE rowid=?1", -1, &one.s, nullptr)
      != SQLITE_OK)
    return failure{sqlite3_errmsg(db_)};
  auto value_at = [&](sqlite3_int64 rowid) {
    sqlite3_reset(one.s);
    sqlite3_bind_int64(one.s, 1, rowid);
    return sqlite3_step(one.s) == SQLITE_ROW ? sqlite3_column_double(one.s, 0) : 0.0;
  };
  for (auto& [key, rows] : ends) {
    out[key].first = value_at(rows.first);
    out[key].last = value_at(rows.second);
  }
  return out;
}

expected<std::map<job_id, std::map<std::string, metric_stats>>>
journal::metric_summaries_of(const std::vector<job_id>& jobs) {
  std::map<job_id, std::map<std::string, metric_stats>> out;
  for (auto& job : jobs) {
    auto sum = summary_of(job);
    if (!sum)
      return failure{sum.error()};
    if (!(*sum)->stats.empty())
      out[job] = (*sum)->stats;
  }
  return out;
}

expected<size_t> journal::compact(int64_t cutoff_ms, const std::vector<job_id>& keep) {
  auto cut = std::to_string(cutoff_ms);
  std::string sql = "BEGIN IMMEDIATE;"
                    "CREATE TEMP TABLE IF NOT EXISTS doomed(id TEXT PRIMARY KEY);"
                    "DELETE FROM doomed;"
                    "INSERT INTO doomed SELECT id FROM jobs WHERE final=1 AND updated_ms < "
                    + cut + ";";
  for (auto& id : keep) // ULID text: only [0-9A-Z], safe to inline
    sql += "DELETE FROM doomed WHERE id='" + id.str() + "';";
  sql += "DELETE FROM metrics WHERE job_id IN (SELECT id FROM doomed);"
                      "DELETE FROM transitions WHERE job_id IN (SELECT id FROM doomed);"
                      "DELETE FROM jobs WHERE id IN (SELECT id FROM doomed);";
  if (auto e = exec(sql.c_str()); !e) {
    exec("ROLLBACK;");
    return failure{e.error()};
  }
  auto n = static_cast<size_t>(sqlite3_changes(db_));
  // A tombstone lives as long as a final job would: any copy older than that is compacted
  // by its own node anyway. (Not last: n counts the statement that ends each block.)
  sql = "DELETE FROM tombstones WHERE deleted_ms < " + cut + ";"
        "DELETE FROM doomed;"
        "INSERT INTO doomed SELECT id FROM task_batches WHERE final_count >= count"
        " AND finished_ms < " + cut + ";"
        "DELETE FROM task_ranges WHERE batch IN (SELECT id FROM doomed);"
        "DELETE FROM task_batches WHERE id IN (SELECT id FROM doomed);";
  if (auto e = exec(sql.c_str()); !e) {
    exec("ROLLBACK;");
    return failure{e.error()};
  }
  n += static_cast<size_t>(sqlite3_changes(db_));
  if (auto e = exec("COMMIT;"); !e) {
    exec("ROLLBACK;");
    return failure{e.error()};
  }
  summaries_.clear(); // jobs went with their points
  return n;
}

expected<size_t> journal::transition_count(const job_id& job) {
  stmt_guard st;
  sqlite3_prepare_v2(db_, "SELECT count(*) FROM transitions WHERE job_id=?1", -1, &st.s, nullptr);
  auto id = job.str();
  sqlite3_bind_text(st.s, 1, id.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_ROW)
    return failure{sqlite3_errmsg(db_)};
  return static_cast<size_t>(sqlite3_column_int64(st.s, 0));
}

} // namespace monkey
