// What the leaf's direct search path takes from strangers (DirectAdmission): connection caps overall,
// before the handshake and per source, and the handshake rate, with the counts given back as
// connections authenticate and close.
#include "leaf/service/direct_admission.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace warp {
namespace {

using Refusal = DirectAdmission::Refusal;
using Clock = DirectAdmission::Clock;

DirectAdmission::Limits limits(size_t connections, size_t unauthenticated, size_t per_source) {
  DirectAdmission::Limits l;
  l.connections = connections;
  l.unauthenticated = unauthenticated;
  l.unauthenticated_per_source = per_source;
  return l;
}

TEST(DirectAdmission, OneSourceGetsItsShareOfUnauthenticatedConnectionsOnly) {
  DirectAdmission admission(limits(100, 50, 3), /*secure=*/true);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(admission.admit("10.0.0.1"), Refusal::kNone);
  EXPECT_EQ(admission.admit("10.0.0.1"), Refusal::kSource);
  EXPECT_EQ(admission.admit("10.0.0.2"), Refusal::kNone) << "another source is not held back";
  admission.authenticated("10.0.0.1");  // one of the first source's finishes its handshake
  EXPECT_EQ(admission.admit("10.0.0.1"), Refusal::kNone);
  EXPECT_EQ(admission.open(), 5u);
  EXPECT_EQ(admission.unauthenticated(), 4u);
}

TEST(DirectAdmission, UnauthenticatedConnectionsAreCappedOverall) {
  DirectAdmission admission(limits(100, 4, 16), true);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(admission.admit("10.0.1." + std::to_string(i)), Refusal::kNone);
  EXPECT_EQ(admission.admit("10.0.1.9"), Refusal::kUnauthenticated);
  admission.closed("10.0.1.0", /*was_authenticated=*/false);  // given up: its place is free
  EXPECT_EQ(admission.admit("10.0.1.9"), Refusal::kNone);
  admission.authenticated("10.0.1.1");
  EXPECT_EQ(admission.admit("10.0.1.8"), Refusal::kNone) << "an authenticated connection leaves the count";
  EXPECT_EQ(admission.unauthenticated(), 4u);
}

TEST(DirectAdmission, EveryConnectionCountsAgainstTheDescriptorBudget) {
  DirectAdmission admission(limits(3, 100, 100), true);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(admission.admit("10.0.2.1"), Refusal::kNone);
    admission.authenticated("10.0.2.1");
  }
  EXPECT_EQ(admission.admit("10.0.2.2"), Refusal::kConnections);
  admission.closed("10.0.2.1", /*was_authenticated=*/true);
  EXPECT_EQ(admission.admit("10.0.2.2"), Refusal::kNone);
  EXPECT_EQ(admission.open(), 3u);
}

TEST(DirectAdmission, WithoutCurveOnlyTheConnectionBudgetApplies) {
  DirectAdmission admission(limits(5, 1, 1), /*secure=*/false);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(admission.admit("10.0.3.1"), Refusal::kNone);
  EXPECT_EQ(admission.admit("10.0.3.1"), Refusal::kConnections);
  EXPECT_EQ(admission.unauthenticated(), 0u);
}

TEST(DirectAdmission, HandshakesAreRateLimitedOverallAndPerSource) {
  DirectAdmission::Limits l = limits(100, 100, 100);
  l.handshakes_per_second = 10;
  l.handshakes_per_source_per_second = 4;
  DirectAdmission admission(l, true);
  const Clock::time_point t0 = Clock::now();
  int a = 0, b = 0, c = 0, d = 0;
  for (int i = 0; i < 10; ++i) a += admission.handshake_allowed("a", t0);
  EXPECT_EQ(a, 4) << "a source's own second's worth";
  for (int i = 0; i < 10; ++i) b += admission.handshake_allowed("b", t0);
  for (int i = 0; i < 10; ++i) c += admission.handshake_allowed("c", t0);
  EXPECT_EQ(b, 4);
  EXPECT_EQ(c, 2) << "the overall second's worth (10) is spent";
  for (int i = 0; i < 10; ++i) d += admission.handshake_allowed("d", t0);
  EXPECT_EQ(d, 0);
  // Half a second later: five more overall, two more for a source that had spent its four.
  int later = 0;
  for (int i = 0; i < 10; ++i) later += admission.handshake_allowed("a", t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(later, 2);
  int other = 0;
  for (int i = 0; i < 10; ++i) other += admission.handshake_allowed("d", t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(other, 3) << "what is left of the overall refill";
}

// Under an open-file limit 300 above the descriptors open now, the budget is what is left past the
// 256 kept back (a few descriptors may open or close meanwhile); with no room, 16.
TEST(DirectAdmission, TheBudgetLeavesTheProcessItsDescriptors) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  size_t open_now = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) open_now += !entry.path().empty();
  rlimit lowered = saved;
  lowered.rlim_cur = std::min<rlim_t>(saved.rlim_max, open_now + 300);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
  const size_t budget = direct_connection_budget(256);
  const size_t cramped = direct_connection_budget(1000);
  ::setrlimit(RLIMIT_NOFILE, &saved);
  EXPECT_GE(budget, 40u);
  EXPECT_LE(budget, 48u);
  EXPECT_EQ(cramped, 16u);
}

}  // namespace
}  // namespace warp
