// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one registered network message of Monkey: a verb and a msgpack body. Every payload
// crosses the network inside it and is size-checked and decoded by runtime/wire/codec.hpp.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace monkey {

struct envelope {
  uint16_t verb = 0;
  std::string body;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, envelope& x) {
  return f(caf::meta::type_name("monkey.envelope"), x.verb, x.body);
}

} // namespace monkey
