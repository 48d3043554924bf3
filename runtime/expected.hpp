// SPDX-License-Identifier: Apache-2.0
#pragma once
// A small expected-style result for the plain-C++ parts (journal, launcher, spec parser)
// that do not depend on CAF. Actor code converts `failure` into a `caf::error`.

#include <string>
#include <utility>
#include <variant>

namespace monkey {

/// An error as a sentence that names what is wrong.
struct failure {
  std::string message;
};

template <class T>
class expected {
public:
  expected(T value) : data_(std::move(value)) {}
  expected(failure err) : data_(std::move(err)) {}
  explicit operator bool() const { return data_.index() == 0; }
  T& operator*() { return std::get<0>(data_); }
  const T& operator*() const { return std::get<0>(data_); }
  T* operator->() { return &std::get<0>(data_); }
  const T* operator->() const { return &std::get<0>(data_); }
  const std::string& error() const { return std::get<1>(data_).message; }

private:
  std::variant<T, failure> data_;
};

/// For operations without a value: success, or the failure that names what went wrong.
template <>
class expected<void> {
public:
  expected() = default;
  expected(failure err) : error_(std::move(err.message)), failed_(true) {}
  explicit operator bool() const { return !failed_; }
  const std::string& error() const { return error_; }

private:
  std::string error_;
  bool failed_ = false;
};

using status = expected<void>;

} // namespace monkey
