// SPDX-License-Identifier: Apache-2.0
// Shipping a job's working directory and data (docs/shipping.md): pack each into a bundle
// named by its SHA-256, ask the cluster which it holds already, upload the rest in chunks
// (the node that takes the last chunk checks the hash, stores it and copies it to two more
// nodes), and describe them in the job spec. A job's uncommitted diff is stored the same
// way (job_provenance): once per distinct diff, not in every record.
#include "runtime/bin/cli/cli.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "runtime/provenance.hpp"
#include "runtime/ship/bundle.hpp"

namespace monkey::cli {

namespace {

namespace fs = std::filesystem;

/// Chunks of the upload: well under an envelope's 16 MiB body limit.
constexpr size_t chunk_bytes = 8u << 20;

struct pending {
  shipment s;
  ship::listing listing;
  std::string file; ///< the packed bundle (a temporary file)
};

/// Removes the temporary bundles when the shipping ends, however it ends.
struct temp_files {
  std::vector<std::string> paths;
  ~temp_files() {
    for (auto& p : paths)
      ::unlink(p.c_str());
  }
};

expected<std::string> temp_path(temp_files& temps) {
  const char* dir = std::getenv("TMPDIR");
  std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/monkey-bundle-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  if (fd < 0)
    return failure{"cannot make a temporary file in " + tmpl.substr(0, tmpl.rfind('/')) + ": "
                   + std::strerror(errno)};
  ::close(fd);
  temps.paths.push_back(tmpl);
  return tmpl;
}

/// Uploads the bundle `p` in chunks; the nodes that hold it afterwards.
expected<std::vector<std::string>> upload(client& c, const pending& p) {
  int fd = ::open(p.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return failure{"cannot read " + p.file + ": " + std::strerror(errno)};
  ship_put_request req;
  req.sha256 = p.s.sha256;
  req.upload = random_key();
  req.label = p.s.kind + " " + p.s.source;
  req.total = p.s.bytes;
  std::string buf(chunk_bytes, '\0');
  for (;;) {
    auto want = static_cast<size_t>(std::min<uint64_t>(chunk_bytes, req.total - req.offset));
    size_t got = 0;
    while (got < want) {
      auto n = ::read(fd, buf.data() + got, want - got);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        break;
      got += static_cast<size_t>(n);
    }
    if (got != want) {
      ::close(fd);
      return failure{"the bundle " + p.file + " changed while it was uploaded"};
    }
    req.data.assign(buf.data(), got);
    bool last = req.offset + got == req.total;
    // The last chunk waits for the hash check and the copies to two more nodes.
    auto timeout = last ? std::chrono::milliseconds(60000 + req.total / (10 * 1000))
                        : std::chrono::milliseconds(60000);
    auto r = c.call<ship_put_reply>(verb::ship_put, req, timeout);
    if (!r) {
      ::close(fd);
      return failure{r.error()};
    }
    if (last) {
      ::close(fd);
      if (!r->stored)
        return failure{"the node did not store the bundle"};
      return r->nodes;
    }
    req.offset += got;
  }
}

std::string describe_listing(const pending& p) {
  auto& l = p.listing;
  std::string out = p.s.source + " (" + l.how + ": " + std::to_string(l.files.size()) + " file"
                    + (l.files.size() == 1 ? "" : "s") + ", " + ship::human_bytes(l.bytes) + ")";
  return out;
}

} // namespace

expected<std::vector<shipment>> ship_files(context& ctx, const std::string& workdir,
                                           const ship_request& what) {
  std::vector<pending> todo;
  std::string cwd_in_bundle;
  if (what.workdir) {
    auto l = ship::list_workdir(workdir, what.max_workdir);
    if (!l)
      return failure{"--ship-workdir: " + l.error()
                     + " (--ship-max raises the limit; a .gitignore keeps build outputs out)"};
    pending p;
    p.s.kind = "workdir";
    p.s.source = workdir;
    p.s.into = "work";
    p.s.cwd = l->cwd_rel;
    cwd_in_bundle = l->cwd_rel;
    p.listing = std::move(*l);
    todo.push_back(std::move(p));
  }
  for (auto& path : what.data) {
    auto l = ship::list_dir(path, what.max_data);
    if (!l)
      return failure{"--ship-data " + path + ": " + l.error()};
    std::error_code ec;
    auto abs = fs::absolute(path, ec).lexically_normal();
    if (abs.filename().empty()) // "dir/": the name is the last component
      abs = abs.parent_path();
    bool is_file = l->how == "file";
    auto rel = fs::path(path).lexically_normal();
    pending p;
    p.s.kind = "data";
    p.s.source = abs.string();
    bool under_work = what.workdir && rel.is_relative() && !rel.empty() && rel != "."
                      && rel.begin()->string() != "..";
    if (under_work) {
      // A relative path lands where it was, under the shipped working directory.
      auto place = is_file ? rel.parent_path() : rel;
      auto base = fs::path("work");
      if (!cwd_in_bundle.empty())
        base /= cwd_in_bundle;
      p.s.into = (place.empty() ? base : base / place).lexically_normal().generic_string();
    } else {
      p.s.into = is_file ? std::string("data") : "data/" + abs.filename().string();
    }
    if (!ship::safe_path(p.s.into))
      return failure{"--ship-data " + path + ": cannot be placed (its name is '"
                     + abs.filename().string() + "')"};
    p.listing = std::move(*l);
    todo.push_back(std::move(p));
  }
  if (todo.empty())
    return std::vector<shipment>{};

  temp_files temps;
  for (auto& p : todo) {
    auto file = temp_path(temps);
    if (!file)
      return failure{file.error()};
    p.file = *file;
    auto packed = ship::pack(p.listing, p.file);
    if (!packed)
      return failure{"packing " + p.s.source + ": " + packed.error()};
    p.s.sha256 = packed->sha256;
    p.s.bytes = packed->bytes;
    p.s.files = static_cast<int64_t>(packed->files);
    if (!what.quiet)
      for (auto& skipped : p.listing.skipped)
        std::fprintf(stderr, "monkey: ship: not shipped: %s\n", skipped.c_str());
  }

  auto c = ctx.connect();
  if (!c)
    return failure{c.error()};
  ship_have_request have;
  for (auto& p : todo)
    have.sha256.push_back(p.s.sha256);
  auto held = (*c)->call<ship_have_reply>(verb::ship_have, have, std::chrono::seconds(30));
  if (!held)
    return failure{"ship: " + held.error()};
  std::vector<shipment> out;
  for (size_t i = 0; i < todo.size(); ++i) {
    auto& p = todo[i];
    auto holders = i < held->holders.size() ? held->holders[i] : 0;
    if (holders > 0) {
      if (!what.quiet)
        std::fprintf(stderr, "monkey: ship: %s %s is in the cluster already (bundle %s, %d node%s)\n",
                     p.s.kind.c_str(), describe_listing(p).c_str(), p.s.sha256.substr(0, 12).c_str(),
                     holders, holders == 1 ? "" : "s");
    } else {
      auto nodes = upload(**c, p);
      if (!nodes)
        return failure{"ship: uploading " + p.s.source + ": " + nodes.error()};
      if (!what.quiet)
        std::fprintf(stderr, "monkey: ship: %s %s stored as bundle %s on %zu node%s\n",
                     p.s.kind.c_str(), describe_listing(p).c_str(),
                     p.s.sha256.substr(0, 12).c_str(), nodes->size(),
                     nodes->size() == 1 ? "" : "s");
    }
    out.push_back(p.s);
  }
  return out;
}

std::map<std::string, std::string> job_provenance(context& ctx, const std::string& workdir,
                                                  const std::vector<std::string>& command) {
  std::string diff;
  auto p = collect_provenance(workdir, command, &diff);
  if (diff.empty())
    return p;
  // Asked first: the diff is written to a file for the upload only when no member has it.
  auto stored = [&]() -> expected<void> {
    auto c = ctx.connect();
    if (!c)
      return failure{c.error()};
    auto sha = p.at("git_diff_sha256");
    auto held = (*c)->call<ship_have_reply>(verb::ship_have, ship_have_request{{sha}},
                                            std::chrono::seconds(30));
    if (!held)
      return failure{held.error()};
    if (!held->holders.empty() && held->holders[0] > 0)
      return {};
    temp_files temps;
    auto file = temp_path(temps);
    if (!file)
      return failure{file.error()};
    {
      std::ofstream out(*file, std::ios::binary);
      out.write(diff.data(), static_cast<std::streamsize>(diff.size()));
      if (!out.flush())
        return failure{"cannot write " + *file};
    }
    pending d;
    d.s.kind = "diff";
    d.s.source = workdir;
    d.s.sha256 = sha;
    d.s.bytes = diff.size();
    d.file = *file;
    auto nodes = upload(**c, d);
    if (!nodes)
      return failure{nodes.error()};
    return {};
  }();
  if (stored) {
    p["git_diff_stored"] = "yes";
  } else {
    std::fprintf(stderr, "monkey: the uncommitted changes (%s) could not be stored in the "
                 "cluster (%s): the job records at most their first %zu bytes\n",
                 ship::human_bytes(diff.size()).c_str(), stored.error().c_str(), max_recorded_diff);
    keep_diff_inline(p, std::move(diff));
  }
  return p;
}

} // namespace monkey::cli
