// SPDX-License-Identifier: Apache-2.0
#include "runtime/journal/journal.hpp"

#include <cstdio>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <sqlite3.h>

using namespace monkey;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/monkey-journal-XXXXXX";
  return ::mkdtemp(tmpl);
}

job_record make_record(int i) {
  job_record rec;
  rec.id = job_id::generate();
  rec.spec.command = {"/bin/echo", std::to_string(i)};
  rec.version = 1;
  rec.updated_ms = now_ms();
  rec.submit_seq = static_cast<uint64_t>(i);
  return rec;
}

/// Writes `n` records in `batches` commits from a child process that then dies without
/// closing the database, as after kill -9: the WAL stays behind.
void crash_writer(const std::string& dir, int n, int batches) {
  pid_t pid = ::fork();
  if (pid == 0) {
    auto j = journal::open(dir, nullptr);
    if (!j)
      ::_exit(3);
    for (int b = 0; b < batches; ++b) {
      write_batch batch;
      for (int i = 0; i < n / batches; ++i)
        batch.records.push_back(make_record(b * 1000 + i));
      if (!(*j)->write(batch))
        ::_exit(4);
    }
    ::_exit(0);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  REQUIRE(WIFEXITED(st));
  REQUIRE(WEXITSTATUS(st) == 0);
}

size_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
}

} // namespace

TEST_CASE("journal keeps records, bumps the incarnation and keeps the node id",
          "[runtime][journal]") {
  auto dir = temp_dir();
  node_id first;
  {
    auto j = journal::open(dir, nullptr);
    REQUIRE(j);
    CHECK((*j)->incarnation() == 1);
    first = (*j)->node();
    write_batch b;
    for (int i = 0; i < 100; ++i)
      b.records.push_back(make_record(i));
    REQUIRE((*j)->write(b));
  }
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  CHECK((*j)->incarnation() == 2);
  CHECK((*j)->node() == first);
  auto recs = (*j)->load_jobs();
  REQUIRE(recs);
  CHECK(recs->size() == 100);
}

TEST_CASE("a checkpoint folds the write-ahead log into the database and truncates it",
          "[runtime][journal]") {
  auto dir = temp_dir();
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  write_batch b;
  for (int i = 0; i < 200; ++i)
    b.records.push_back(make_record(i));
  REQUIRE((*j)->write(b));
  auto wal = (*j)->path() + "-wal";
  REQUIRE(file_size(wal) > 0);
  REQUIRE((*j)->checkpoint());
  CHECK(file_size(wal) == 0);
  auto recs = (*j)->load_jobs();
  REQUIRE(recs);
  CHECK(recs->size() == 200);
  REQUIRE((*j)->write(b)); // it goes on writing after
  CHECK(file_size(wal) > 0);
}

TEST_CASE("a newer version of a record wins and an older one never overwrites it",
          "[runtime][journal]") {
  auto dir = temp_dir();
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto rec = make_record(1);
  rec.version = 5;
  rec.reason = "five";
  REQUIRE((*j)->write({{rec}, {}, {}, {}, {}}));
  rec.version = 3;
  rec.reason = "three";
  REQUIRE((*j)->write({{rec}, {}, {}, {}, {}}));
  auto recs = (*j)->load_jobs();
  REQUIRE(recs->size() == 1);
  CHECK(recs->at(0).reason == "five");
  // The refused older copy is no transition of this journal's record.
  CHECK(*(*j)->transition_count(rec.id) == 1);
}

TEST_CASE("the journal keeps the copy that stands: a final one over any other, and a final "
          "one is never replaced by another",
          "[runtime][journal]") {
  auto dir = temp_dir();
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto adopted = make_record(1);
  adopted.version = (1u << 20) + 2; // an adopter's later term, still running
  adopted.state = job_state::running;
  REQUIRE((*j)->write({{adopted}, {}, {}, {}, {}}));
  auto final_rec = adopted;
  final_rec.version = 7; // the first owner's final state, committed by its holders first
  final_rec.state = job_state::succeeded;
  final_rec.reason = "attempt 1: exit 0";
  REQUIRE((*j)->write({{final_rec}, {}, {}, {}, {}}));
  auto other = final_rec;
  other.version = (1u << 20) + 4;
  other.reason = "attempt 2: exit 0";
  REQUIRE((*j)->write({{other}, {}, {}, {}, {}}));
  // The refused copy left no trace: the history holds no second final state.
  CHECK(*(*j)->transition_count(final_rec.id) == 2);
  auto moved = final_rec; // the same final state, its holders moved (custody)
  moved.replicas = {"a", "b"};
  REQUIRE((*j)->write({{moved}, {}, {}, {}, {}}));
  auto recs = (*j)->load_jobs();
  REQUIRE(recs->size() == 1);
  CHECK(recs->at(0).reason == "attempt 1: exit 0");
  CHECK(recs->at(0).replicas == std::vector<std::string>{"a", "b"});
  write_batch gone;
  gone.erase.push_back(final_rec.id);
  REQUIRE((*j)->write(gone));
  CHECK((*j)->load_jobs()->empty());
  CHECK(*(*j)->transition_count(final_rec.id) == 0);
}

TEST_CASE("metrics keep their last value per key", "[runtime][journal]") {
  auto dir = temp_dir();
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto id = job_id::generate();
  write_batch b;
  for (int i = 0; i < 10; ++i)
    b.metrics.push_back({id, 1, now_ms(), "loss", 1.0 / (i + 1), i + 1});
  b.metrics.push_back({id, 1, now_ms(), "acc", 9});
  REQUIRE((*j)->write(b));
  auto last = (*j)->last_metrics(id);
  REQUIRE(last);
  CHECK(last->at("loss").value == Approx(0.1));
  CHECK(last->at("acc").value == 9);
  CHECK((*j)->metrics(id, "loss", 100)->size() == 10);
}

TEST_CASE("a metric's history: count, first, min, max, last, last values of many jobs",
          "[runtime][journal]") {
  auto dir = temp_dir();
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto a = job_id::generate(), b = job_id::generate(), none = job_id::generate();
  write_batch w;
  int64_t step = 0;
  for (double v : {0.9, 0.2, 0.5, 0.7})
    w.metrics.push_back({a, 1, now_ms(), "loss", v, ++step});
  w.metrics.push_back({a, 1, now_ms(), "acc", 0.8, 1});
  w.metrics.push_back({b, 1, now_ms(), "loss", 3, 1});
  REQUIRE((*j)->write(w));
  REQUIRE((*j)->write(w)); // the same points again (a replicated batch sent twice): stored once
  write_batch other_rank;
  other_rank.metrics.push_back({a, 1, now_ms(), "loss", 0.1, 1, 1}); // rank 1's step 1
  REQUIRE((*j)->write(other_rank));
  auto s = (*j)->metric_summary(a);
  REQUIRE(s);
  REQUIRE(s->count("loss"));
  auto& loss = s->at("loss");
  CHECK(loss.count == 5);
  CHECK(loss.first == Approx(0.9));
  CHECK(loss.min == Approx(0.1));
  CHECK(loss.max == Approx(0.9));
  CHECK(loss.last == Approx(0.1));
  auto series = (*j)->metrics(a, "loss", 100);
  REQUIRE(series->size() == 5); // rank 0's steps 1..4, then rank 1's step 1
  CHECK(series->at(0).step == 1);
  CHECK(series->at(3).step == 4);
  CHECK(series->at(4).rank == 1);
  CHECK(s->at("acc").count == 1);
  auto last = (*j)->metric_summaries_of({a, b, none});
  REQUIRE(last);
  CHECK(last->size() == 2);
  CHECK(last->at(a).at("loss").last == Approx(0.1));
  CHECK(last->at(a).at("loss").count == 5);
  CHECK(last->at(a).at("acc").last == Approx(0.8));
  CHECK(last->at(b).at("loss").last == Approx(3));
  CHECK((*j)->metric_summary(none)->empty());
}

TEST_CASE("the metric summary kept in memory stays equal to the points' after every write, "
          "a duplicate, an erase and a reopen",
          "[runtime][journal]") {
  auto dir = temp_dir();
  auto a = job_id::generate(), b = job_id::generate();
  std::map<std::string, metric_stats> kept_a;
  std::map<std::string, metric_point> last_a;
  {
    auto j = journal::open(dir, nullptr);
    REQUIRE(j);
    write_batch w;
    w.metrics.push_back({a, 1, now_ms(), "loss", 0.5, 1});
    REQUIRE((*j)->write(w));
    REQUIRE((*j)->metric_summary(a)->at("loss").count == 1); // read: kept from now on
    REQUIRE((*j)->metric_summaries_of({b})->empty());
    int64_t step = 1;
    for (int round = 0; round < 5; ++round) {
      write_batch more;
      for (double v : {0.4, 0.9, 0.05})
        more.metrics.push_back({a, 1, now_ms(), "loss", v + round, ++step});
      more.metrics.push_back({a, 1, now_ms(), "acc", 0.1 * round, round}); // a new key
      more.metrics.push_back({a, 1, now_ms(), "loss", 77, 1});             // a duplicate
      more.metrics.push_back({b, 2, now_ms(), "loss", -1.0 * round, round, 1});
      REQUIRE((*j)->write(more));
      auto s = (*j)->metric_summary(a);
      REQUIRE(s);
      CHECK(s->at("loss").count == 1 + 3 * (round + 1));
      CHECK(s->at("loss").last == Approx(0.05 + round));
      CHECK(s->at("loss").max == Approx(0.9 + round));
      CHECK(s->at("loss").first == Approx(0.5));
      CHECK(s->at("acc").count == round + 1);
      CHECK((*j)->last_metrics(a)->at("loss").step == step);
      CHECK((*j)->metric_summaries_of({b})->at(b).at("loss").last == Approx(-1.0 * round));
      CHECK((*j)->metric_summaries_of({b})->at(b).at("loss").count == round + 1);
    }
    kept_a = *(*j)->metric_summary(a);
    last_a = *(*j)->last_metrics(a);
  }
  // Read again from the points by a fresh journal: the same figures.
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto fresh = (*j)->metric_summary(a);
  REQUIRE(fresh);
  REQUIRE(fresh->size() == kept_a.size());
  for (auto& [k, s] : kept_a) {
    INFO(k);
    CHECK(fresh->at(k).count == s.count);
    CHECK(fresh->at(k).first == s.first);
    CHECK(fresh->at(k).min == s.min);
    CHECK(fresh->at(k).max == s.max);
    CHECK(fresh->at(k).last == s.last);
    CHECK((*j)->last_metrics(a)->at(k).step == last_a.at(k).step);
  }
  // An erased job's summary goes with its points.
  write_batch gone;
  gone.erase.push_back(a);
  REQUIRE((*j)->write(gone));
  CHECK((*j)->metric_summary(a)->empty());
  CHECK((*j)->last_metrics(a)->empty());
}

TEST_CASE("compaction removes old final jobs and keeps the rest", "[runtime][journal]") {
  auto dir = temp_dir();
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto old_done = make_record(1);
  old_done.state = job_state::succeeded;
  old_done.updated_ms = 1000;
  auto old_queued = make_record(2);
  old_queued.updated_ms = 1000;
  auto new_done = make_record(3);
  new_done.state = job_state::failed;
  REQUIRE((*j)->write({{old_done, old_queued, new_done}, {{old_done.id, 1, 1, "x", 1}}, {}, {}, {}}));
  auto n = (*j)->compact(now_ms() - 60000);
  REQUIRE(n);
  CHECK(*n == 1);
  auto recs = (*j)->load_jobs();
  CHECK(recs->size() == 2);
  CHECK((*j)->last_metrics(old_done.id)->empty());
  // A final job that is named in `keep` (a queued job depends on it) stays.
  auto dep = make_record(4);
  dep.state = job_state::succeeded;
  dep.updated_ms = 1000;
  REQUIRE((*j)->write({{dep}, {}, {}, {}, {}}));
  n = (*j)->compact(now_ms() - 60000, {dep.id});
  REQUIRE(n);
  CHECK(*n == 0);
  CHECK((*j)->load_jobs()->size() == 3);
}

TEST_CASE("after a crash every committed record is there", "[runtime][journal]") {
  auto dir = temp_dir();
  crash_writer(dir, 300, 3);
  REQUIRE(file_size(dir + "/journal.db-wal") > 0);
  std::vector<std::string> warnings;
  auto j = journal::open(dir, &warnings);
  REQUIRE(j);
  CHECK(warnings.empty());
  CHECK((*j)->load_jobs()->size() == 300);
}

TEST_CASE("a garbled WAL tail is dropped with a warning", "[runtime][journal]") {
  auto dir = temp_dir();
  crash_writer(dir, 200, 2);
  auto wal = dir + "/journal.db-wal";
  {
    std::ofstream out(wal, std::ios::app | std::ios::binary);
    std::string junk(5000, '\x5a');
    out << junk;
  }
  std::vector<std::string> warnings;
  auto j = journal::open(dir, &warnings);
  REQUIRE(j);
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::Contains("garbled WAL tail"));
  CHECK((*j)->load_jobs()->size() == 200);
}

TEST_CASE("a torn last WAL frame loses only the last commit", "[runtime][journal]") {
  auto dir = temp_dir();
  crash_writer(dir, 200, 2);
  auto wal = dir + "/journal.db-wal";
  auto size = file_size(wal);
  REQUIRE(::truncate(wal.c_str(), static_cast<off_t>(size - 100)) == 0);
  std::vector<std::string> warnings;
  auto j = journal::open(dir, &warnings);
  REQUIRE(j);
  CHECK_FALSE(warnings.empty());
  auto n = (*j)->load_jobs()->size();
  CHECK(n == 100); // the first commit survives whole; the torn second is gone whole
}

TEST_CASE("corruption in the middle of the WAL refuses to start", "[runtime][journal]") {
  auto dir = temp_dir();
  crash_writer(dir, 300, 3);
  auto wal = dir + "/journal.db-wal";
  {
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(32 + 24 + 100); // inside the first frame's page
    f.put('\x01').put('\x02').put('\x03');
  }
  auto j = journal::open(dir, nullptr);
  REQUIRE_FALSE(j);
  CHECK_THAT(j.error(), Catch::Contains("corrupt in the middle"));
  CHECK_THAT(j.error(), Catch::Contains("refuses to start"));
}

TEST_CASE("a corrupt database file refuses to start with a clear message",
          "[runtime][journal]") {
  auto dir = temp_dir();
  {
    auto j = journal::open(dir, nullptr);
    REQUIRE(j);
    write_batch b;
    for (int i = 0; i < 500; ++i)
      b.records.push_back(make_record(i));
    REQUIRE((*j)->write(b));
  }
  auto db = dir + "/journal.db";
  auto size = file_size(db);
  REQUIRE(size > 8192);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    std::string junk(4096, '\x77');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  auto j = journal::open(dir, nullptr);
  REQUIRE_FALSE(j);
  CHECK_THAT(j.error(), Catch::Contains("refusing to start"));
}

TEST_CASE("task batches and their final ranges survive a reopen, and are compacted",
          "[runtime][journal][tasks]") {
  auto dir = temp_dir();
  task_batch done_batch, open_batch;
  {
    auto j = journal::open(dir, nullptr);
    REQUIRE(j);
    done_batch.id = job_id::generate();
    done_batch.kind = "noop";
    done_batch.count = 10;
    done_batch.submitted_ms = 100;
    open_batch.id = job_id::generate();
    open_batch.kind = "sleep";
    open_batch.arg = 5;
    open_batch.count = 50;
    open_batch.submitted_ms = 200;
    write_batch w;
    w.task_batches = {done_batch, open_batch};
    REQUIRE((*j)->write(w));
    write_batch f;
    f.task_ranges = {{done_batch.id, 0, 7, true, "", 1000},
                     {done_batch.id, 7, 1, false, "boom", 1000},
                     {done_batch.id, 8, 2, true, "", 1000},
                     {open_batch.id, 0, 20, true, "", 1000}};
    REQUIRE((*j)->write(f));
  }
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  auto tasks = (*j)->load_tasks();
  REQUIRE(tasks);
  REQUIRE(tasks->size() == 2);
  CHECK((*tasks)[0].batch.id == done_batch.id);
  CHECK((*tasks)[0].done.size() == 3);
  CHECK((*tasks)[0].done[1].cause == "boom");
  CHECK((*tasks)[1].batch.kind == "sleep");
  CHECK((*tasks)[1].batch.arg == 5);
  CHECK((*tasks)[1].done.size() == 1);
  // Only the batch whose tasks are all final goes, with its ranges.
  auto n = (*j)->compact(now_ms());
  REQUIRE(n);
  CHECK(*n == 1);
  tasks = (*j)->load_tasks();
  REQUIRE(tasks->size() == 1);
  CHECK((*tasks)[0].batch.id == open_batch.id);
}

TEST_CASE("a schema-1 journal is migrated to the current schema", "[runtime][journal]") {
  auto dir = temp_dir();
  auto rec = make_record(1);
  {
    auto j = journal::open(dir, nullptr);
    REQUIRE((*j)->write({{rec}, {}, {}, {}, {}}));
  }
  // Take it back to schema 1: drop what versions 2 and 3 added; two metric points of the
  // old form (no step: they must not collide on the new unique index).
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir + "/journal.db").c_str(), &db) == SQLITE_OK);
    auto sql = "DROP TABLE task_ranges; DROP TABLE task_batches; DROP INDEX metrics_point;"
               " DROP TABLE tombstones;"
               " ALTER TABLE metrics DROP COLUMN rank; ALTER TABLE metrics DROP COLUMN step;"
               " INSERT INTO metrics VALUES('" + rec.id.str() + "', 1, 1, 'loss', 0.5);"
               " INSERT INTO metrics VALUES('" + rec.id.str() + "', 1, 2, 'loss', 0.25);"
               " DELETE FROM schema_version WHERE version > 1;";
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto j = journal::open(dir, nullptr);
  REQUIRE(j);
  CHECK((*j)->load_jobs()->size() == 1);
  auto points = (*j)->metrics(rec.id, "loss", 10);
  REQUIRE(points);
  REQUIRE(points->size() == 2);
  CHECK(points->at(0).step < points->at(1).step);
  CHECK(points->at(1).value == Approx(0.25));
  auto tasks = (*j)->load_tasks();
  REQUIRE(tasks);
  CHECK(tasks->empty());
}

TEST_CASE("tombstones: kept with the deletion, read back, pruned by compaction",
          "[runtime][journal]") {
  auto dir = temp_dir();
  auto rec = make_record(1);
  rec.state = job_state::succeeded;
  {
    auto j = journal::open(dir, nullptr);
    REQUIRE((*j)->write({{rec}, {{rec.id, 1, 1, "loss", 0.5, 1}}, {}, {}, {}}));
    write_batch rm;
    rm.erase.push_back(rec.id);
    rm.tombstones.push_back(rec.id);
    REQUIRE((*j)->write(rm));
    REQUIRE((*j)->write(rm)); // twice: one tombstone
  }
  auto j = journal::open(dir, nullptr); // they survive a restart
  REQUIRE(j);
  CHECK((*j)->load_jobs()->empty());
  CHECK((*j)->metric_summary(rec.id)->empty());
  auto t = (*j)->load_tombstones();
  REQUIRE(t);
  CHECK(*t == std::vector<job_id>{rec.id});
  REQUIRE((*j)->compact(now_ms() - 60000)); // younger than the cutoff: kept
  CHECK((*j)->load_tombstones()->size() == 1);
  REQUIRE((*j)->compact(now_ms() + 60000));
  CHECK((*j)->load_tombstones()->empty());
}
