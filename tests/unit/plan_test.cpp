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

TEST(ShardCount, TheManifestsLimitCapsTheSlots) {
  // mamba-ssm's backward files: 5 launch configurations, at most 2 shards.
  EXPECT_EQ(shard_count(5, 16), 5);
  EXPECT_EQ(shard_count(5, 16, 2), 2);  // 3 + 2
  EXPECT_EQ(shard_count(5, 1, 2), 1);
  EXPECT_EQ(shard_count(15, 16, 3), 3);   // 5 each
  EXPECT_EQ(shard_count(18, 16, 4), 4);   // 5 + 5 + 4 + 4, as with 4 slots
  EXPECT_EQ(shard_count(18, 16, 18), 9);  // a limit above the slots changes nothing
  EXPECT_LE(shard_count(18, 0, 3), 3);
}

// The label a package argument's local label must match: the one wheel/ gives the target's wheels.
TEST(TargetLocalLabel, CudaAndTheMinorOfTorch) {
  ResolvedTarget rt;
  rt.target.cuda_version = "13.0";
  rt.target.torch_version = "2.11.0";
  EXPECT_EQ(target_local_label(rt), "cu130torch2.11");
  rt.target.cuda_version = "12.8";
  rt.torch = toolchain::TorchSysroot{};
  rt.torch->version = "2.10.1+cu128";  // an environment's torch, once probed
  EXPECT_EQ(target_local_label(rt), "cu128torch2.10");
}

}  // namespace kiln::resolve
