// SPDX-License-Identifier: Apache-2.0
#pragma once
// The registered network messages of Monkey: the envelope (a verb and a msgpack body) and
// the app SDK's app_message. Every payload
// crosses the network inside it and is size-checked and decoded by runtime/wire/codec.hpp.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "monkey/sdk/message.hpp" // app_message, the app SDK's envelope

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
