// SPDX-License-Identifier: Apache-2.0
#pragma once
// `monkey up N` and `monkey down`: a local cluster of N monkey-runtime processes under
// MONKEY_HOME (data directories MONKEY_HOME/nodes/nK, the list in MONKEY_HOME/up.json,
// the addresses in MONKEY_HOME/cluster, where plain `monkey ...` commands find them).

#include <string>
#include <vector>

namespace monkey {

struct up_options {
  int nodes = 3;
  int cpus = 0;             ///< per node; 0: the host's CPUs split evenly
  double timeout_s = 60;    ///< until every node sees every other alive
  bool no_measure = false;
  bool json = false;
  bool tls = false;         ///< TLS everywhere, certificates in MONKEY_HOME/certs
  std::string secret_file;  ///< passed on to the runtimes when given
  std::vector<std::string> runtime_args; ///< more monkey-runtime options for every node
  std::string restart; ///< --restart NAME: start that node of the cluster again, nothing else
};

/// Starts the nodes; returns once every node sees N alive (0), else non-zero with why.
/// With `restart`: starts that one node again (on its data directory, with its options,
/// joining through the running nodes) and waits until the running nodes see it alive.
int cluster_up(const up_options& opt);

/// Resumes stopped nodes, stops all (SIGTERM, SIGKILL after `grace_s`), waits for them.
int cluster_down(double grace_s);

} // namespace monkey
