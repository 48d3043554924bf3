// SPDX-License-Identifier: Apache-2.0
#pragma once
// The only header that includes <msgpack.hpp>. Records and protocol messages declare
// MSGPACK_DEFINE_MAP (the map form survives added fields); encode/decode here size-check
// and validate input before it becomes a value.

#include <cstdint>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "runtime/expected.hpp"
#include "runtime/ids.hpp"

namespace monkey {

/// Largest msgpack body accepted from the network, the journal or a file.
constexpr size_t max_body_bytes = 16 * 1024 * 1024;

template <class T>
std::string encode(const T& value) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, value);
  return std::string(buf.data(), buf.size());
}

/// Decodes `bytes` into a T; an oversized, truncated or mistyped body is a failure that
/// names `what` and the problem. Never throws.
template <class T>
expected<T> decode(std::string_view bytes, const char* what) {
  if (bytes.size() > max_body_bytes)
    return failure{std::string(what) + ": message of " + std::to_string(bytes.size())
                   + " bytes exceeds the limit of " + std::to_string(max_body_bytes)};
  try {
    // Limits stop a tiny body from declaring a huge array or map.
    msgpack::unpack_limit limit(1 << 20, 1 << 20, 1 << 24, 1 << 24, 1 << 20, 64);
    auto handle = msgpack::unpack(bytes.data(), bytes.size(), nullptr, nullptr, limit);
    T out;
    handle.get().convert(out);
    return out;
  } catch (const std::exception& e) {
    return failure{std::string(what) + ": malformed message (" + e.what() + ")"};
  }
}

} // namespace monkey

// job_id travels as two unsigned integers, node_id as one.
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
namespace adaptor {

template <>
struct convert<monkey::job_id> {
  const msgpack::object& operator()(const msgpack::object& o, monkey::job_id& v) const {
    if (o.type != msgpack::type::ARRAY || o.via.array.size != 2)
      throw msgpack::type_error();
    v.hi = o.via.array.ptr[0].as<uint64_t>();
    v.lo = o.via.array.ptr[1].as<uint64_t>();
    return o;
  }
};

template <>
struct pack<monkey::job_id> {
  template <class Stream>
  packer<Stream>& operator()(msgpack::packer<Stream>& o, const monkey::job_id& v) const {
    o.pack_array(2);
    o.pack(v.hi);
    o.pack(v.lo);
    return o;
  }
};

template <>
struct object_with_zone<monkey::job_id> {
  void operator()(msgpack::object::with_zone& o, const monkey::job_id& v) const {
    o.type = type::ARRAY;
    o.via.array.size = 2;
    o.via.array.ptr = static_cast<msgpack::object*>(
      o.zone.allocate_align(sizeof(msgpack::object) * 2, MSGPACK_ZONE_ALIGNOF(msgpack::object)));
    o.via.array.ptr[0] = msgpack::object(v.hi, o.zone);
    o.via.array.ptr[1] = msgpack::object(v.lo, o.zone);
  }
};

template <>
struct convert<monkey::node_id> {
  const msgpack::object& operator()(const msgpack::object& o, monkey::node_id& v) const {
    v.value = o.as<uint64_t>();
    return o;
  }
};

template <>
struct pack<monkey::node_id> {
  template <class Stream>
  packer<Stream>& operator()(msgpack::packer<Stream>& o, const monkey::node_id& v) const {
    o.pack(v.value);
    return o;
  }
};

} // namespace adaptor
} // MSGPACK_API_VERSION_NAMESPACE
} // namespace msgpack
