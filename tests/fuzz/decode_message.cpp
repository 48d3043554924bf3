// SPDX-License-Identifier: Apache-2.0
// Fuzzes the decoder of every message body that crosses the network (runtime/wire/codec.hpp):
// the first byte picks the message type, the rest is the body. Decoded requests go on
// through the checks a node applies before it acts on them (validate, arrays, params).
#include "tests/fuzz/fuzz.hpp"

#include "runtime/wire/messages/client.hpp"
#include "runtime/supervision/supervisor.hpp"

using namespace monkey;

namespace {

template <class T>
void one(const std::string& body) {
  (void)decode<T>(body, "fuzz");
}

void submit(const std::string& body) {
  auto r = decode<submit_request>(body, "fuzz");
  if (!r)
    return;
  if (validate(r->spec)) {
    (void)display_name(r->spec);
    if (!r->spec.array.empty())
      (void)expand_array(r->spec.array);
  }
}

using decoder = void (*)(const std::string&);
const decoder decoders[] = {
  submit,
  one<hello_request>,     one<hello_reply>,        one<auth_request>,
  one<auth_reply>,        one<replicate_request>,  one<replicate_reply>,
  one<reserve_reply>,     one<digest_request>,     one<digest_reply>,
  one<fetch_request>,     one<submit_reply>,       one<submit_tasks_request>,
  one<submit_tasks_reply>, one<wait_tasks_request>, one<task_list_reply>,
  one<nodes_reply>,       one<peer_join_request>,  one<peer_ping_request>,
  one<peer_ack>,          one<peer_ping_req_request>, one<list_request>,
  one<list_reply>,        one<id_request>,         one<show_reply>,
  one<text_reply>,        one<logs_request>,       one<logs_reply>,
  one<status_reply>,      one<tree_node>,          one<std::string>,
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1)
    return 0;
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  decoders[data[0] % (sizeof(decoders) / sizeof(decoders[0]))](body);
  return 0;
}

std::vector<std::string> monkey_fuzz_seeds() {
  std::vector<std::string> out;
  auto add = [&](uint8_t which, const std::string& body) {
    out.push_back(std::string(1, static_cast<char>(which)) + body);
  };
  submit_request s;
  s.spec.command = {"python3", "train.py", "--lr", "{lr}"};
  s.spec.params = {{"lr", "0.1"}};
  s.spec.array = "0-9:2";
  s.spec.after = {{"ok", job_id::generate()}};
  s.client_key = "k";
  add(0, encode(s));
  add(1, encode(hello_request{}));
  job_record rec;
  rec.id = job_id::generate();
  rec.spec = s.spec;
  rec.replicas = {"a", "b"};
  attempt_record at;
  at.number = 1;
  at.outcome = "succeeded";
  rec.attempts.push_back(at);
  add(5, encode(replicate_request{"n", {rec}}));
  digest_reply d;
  d.entries = {{rec.id, 7, true, "0000000000000001"}};
  add(9, encode(d));
  list_request l("running", 10);
  l.key = "k";
  add(21, encode(l));
  list_reply lr;
  job_summary js;
  js.id = rec.id;
  js.holders = {"a"};
  lr.jobs = {js};
  add(22, encode(lr));
  add(23, encode(id_request{"ABCDEF", true}));
  show_reply sr;
  sr.record = rec;
  sr.last_metrics = {{"loss", 0.5}};
  add(24, encode(sr));
  tree_node t;
  t.name = "node";
  t.children.push_back(tree_node{});
  add(29, encode(t));
  return out;
}
