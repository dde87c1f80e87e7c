#include "resolve/plan.h"

#include <gtest/gtest.h>

namespace kiln::resolve {

TEST(ShardCount, FewestShardsThatKeepTheLargestShardSmall) {
  // causal-conv1d's backward file: 18 explicit instantiations.
  EXPECT_EQ(shard_count(18, 1), 1);
  EXPECT_EQ(shard_count(18, 2), 2);   // 9 + 9
  EXPECT_EQ(shard_count(18, 4), 4);   // 5 + 5 + 4 + 4
  EXPECT_EQ(shard_count(18, 8), 6);   // 3 each: 8 shards would still have some of 3
  EXPECT_EQ(shard_count(18, 16), 9);  // 2 each
  EXPECT_EQ(shard_count(18, 18), 18);
  EXPECT_EQ(shard_count(18, 64), 18);  // never more than the units
  EXPECT_EQ(shard_count(1, 16), 1);
  EXPECT_EQ(shard_count(3, 2), 2);
  EXPECT_GE(shard_count(18, 0), 1);  // 0: one slot per core
}

}  // namespace kiln::resolve
