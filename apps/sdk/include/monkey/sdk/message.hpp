// SPDX-License-Identifier: Apache-2.0
#pragma once
// The one CAF message type that carries an app's own messages between its actors: the
// sender's rank, the app's type name and a msgpack body. Every Monkey binary registers it
// (and nothing of an app's), so an app's message types never change CAF's application
// identifier and an app host always speaks its node's protocol.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace monkey {

struct app_message {
  int32_t from = -1; ///< the sending rank (-1: the app host itself)
  std::string type;  ///< monkey::app::type_name<T>() of the body
  std::string body;  ///< msgpack
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, app_message& x) {
  return f(caf::meta::type_name("monkey.app_message"), x.from, x.type, x.body);
}

} // namespace monkey
