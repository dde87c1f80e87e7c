// A small expected<T, Error> of our own.
//
// libstdc++ 12's <expected> needs C++23 concepts that clang 14 (Debian 12's, used for libFuzzer
// builds) does not provide, so the leaves return this type instead; it compiles as C++20 with both
// compilers. See ARCHITECTURE.md, "Fuzzing".
#pragma once

#include <type_traits>
#include <utility>
#include <variant>

#include "core/error.h"

namespace kiln {

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(const T& value) : v_(std::in_place_index<0>, value) {}
  Expected(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}
  template <class U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, Error> &&
           !std::is_same_v<std::decay_t<U>, T>) Expected(U&& value)
      : v_(std::in_place_index<0>, T(std::forward<U>(value))) {}

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // value() throws KilnError when this holds an error: the bridge from leaves to the CLI.
  T& value() & {
    if (!has_value()) raise(std::get<1>(v_));
    return std::get<0>(v_);
  }
  const T& value() const& {
    if (!has_value()) raise(std::get<1>(v_));
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!has_value()) raise(std::get<1>(v_));
    return std::move(std::get<0>(v_));
  }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::move(std::get<1>(v_)); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), ok_(false) {}
  bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  void value() const {
    if (!ok_) raise(error_);
  }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_;
  bool ok_ = true;
};

// Propagate an error from an Expected-returning call: KILN_TRY(auto x, f());
#define KILN_CONCAT_(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_(a, b)
#define KILN_TRY_IMPL(tmp, decl, expr)     \
  auto tmp = (expr);                       \
  if (!tmp) return std::move(tmp).error(); \
  decl = std::move(*tmp)
#define KILN_TRY(decl, expr) KILN_TRY_IMPL(KILN_CONCAT(kiln_try_, __LINE__), decl, expr)
#define KILN_CHECK(expr)                                     \
  do {                                                       \
    auto kiln_check_ = (expr);                               \
    if (!kiln_check_) return std::move(kiln_check_).error(); \
  } while (0)

}  // namespace kiln
