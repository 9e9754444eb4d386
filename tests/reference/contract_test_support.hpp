// Helpers shared by the contract tests: how a rejected input must fail.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "attncheck/case.hpp"

namespace attncheck::contract_testing {

/// Expects run() to throw input_error naming `field`, with `says` in its
/// message; `input` (what run() reads) leads every failure's message.
template <class Run>
void expect_input_error(const Run& run, std::string_view field, std::string_view says, std::string_view input) {
  try {
    run();
    ADD_FAILURE() << "accepted " << input;
  } catch (const input_error& e) {
    EXPECT_EQ(e.field(), field) << input << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << input << ": " << e.what();
  }
}

}  // namespace attncheck::contract_testing
